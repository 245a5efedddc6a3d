"""Peak RSS and throughput of a real Worker extracting 1 M MariaDB rows (issue 13).

Starts a Manager and a Worker (``fetcher run``) against the machine's PostgreSQL (metadata),
RabbitMQ and the loopback S3 server (``scripts/s3-server.sh start``), creates a fresh MariaDB
database with ``FETCHER_BENCH_MARIADB_ROWS`` (default 1 000 000) rows of mixed types (int, varchar,
decimal, datetime(6), date, json) and a reader
with a password, runs one job over it and reads the Worker's ``VmHWM`` (peak resident set) from
``/proc``. The job must complete with every row and the Worker's peak RSS must stay under
150 MiB; rows/s is the row count over the job's wall time (submission to ``completed``, polled
every 0.2 s). Run: ``.venv/bin/python bench/mariadb_memory.py``.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import time
import uuid

import asyncmy
import psycopg

from bench.worker_memory import (
    ADMIN,
    FETCHER,
    KEY,
    _delete_broker_objects,
    _free_port,
    _http,
    _result_size,
    _vm_hwm_kib,
    _wait_health,
    bench_prefix,
    delete_s3_prefix,
    distributed_env,
)

ROWS = int(os.environ.get("FETCHER_BENCH_MARIADB_ROWS", "1000000"))
MARIADB = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
BOUND_MIB = 150

_CREATE = """
CREATE TABLE ledger (
    id INT PRIMARY KEY, memo VARCHAR(40), amount DECIMAL(12, 2), booked_at DATETIME(6),
    day DATE, doc JSON
)
"""
#: About 170 bytes of JSON per row: 1 M rows stay under the default 256 MiB result limit.
_FILL = """
INSERT INTO ledger
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < {rows})
SELECT n, MD5(n), (n * 37 % 100000) / 100,
       TIMESTAMPADD(MICROSECOND, n * 1000, '2026-01-01 00:00:00'),
       DATE_ADD('2000-01-01', INTERVAL n % 9000 DAY), JSON_OBJECT('n', n)
FROM seq
"""


async def _mariadb(statements: list[tuple[str, tuple[object, ...] | None]]) -> None:
    conn = await asyncmy.connect(**MARIADB, autocommit=True)
    try:
        async with conn.cursor() as cursor:
            for sql, params in statements:
                await cursor.execute(sql, params)
    finally:
        conn.close()


def _source(database: str, reader: str, password: str) -> None:
    asyncio.run(
        _mariadb(
            [
                (f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4", None),
                (f"USE `{database}`", None),
                (_CREATE, None),
                ("SET SESSION max_recursive_iterations = 100000000", None),
                (_FILL.format(rows=ROWS), None),
                ("CREATE USER %s@'%%' IDENTIFIED BY %s", (reader, password)),
                (f"GRANT SELECT ON `{database}`.* TO %s@'%%'", (reader,)),
            ]
        )
    )


def _env(meta_db: str, suffix: str) -> dict[str, str]:
    return {
        **os.environ,
        "APP_ENC_KEY": KEY,
        **distributed_env(meta_db, suffix),
        "READYZ_DRAIN_DELAY_SEC": "1",
        "LOG_LEVEL": "warn",
    }


def _run_job(
    base: str, database: str, reader: str, password: str
) -> tuple[dict[str, object], float, str]:
    _http(
        "POST",
        f"{base}/v1/management/connections",
        {
            "configName": "bench_maria",
            "type": "MYSQL",
            "host": "127.0.0.1",
            "port": 3306,
            "databaseName": database,
            "userName": reader,
            "password": password,
        },
        {"X-Product-Name": "bench"},
    )
    job = _http(
        "POST",
        f"{base}/v1/fetcher",
        {
            "dataRequest": {"mappedFields": {"bench_maria": {"ledger": ["*"]}}},
            "metadata": {"source": "bench"},
        },
    )
    began = time.monotonic()
    while True:
        state = _http("GET", f"{base}/v1/fetcher/{job['jobId']}")
        if state["status"] in ("completed", "failed"):
            return state, time.monotonic() - began, str(job["jobId"])
        time.sleep(0.2)


def main() -> None:
    suffix = uuid.uuid4().hex[:8]
    meta_db = f"fetcher_bench_meta_{suffix}"
    database, reader = f"fetcher_bench_maria_{suffix}", f"bench_rd_{suffix}"
    password = secrets.token_urlsafe(16)
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{meta_db}"')
    env = _env(meta_db, suffix)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        started = time.monotonic()
        _source(database, reader, password)
        print(f"source: {ROWS:,} rows in MariaDB in {time.monotonic() - started:.1f}s")
        api_port, health_port = _free_port(), _free_port()
        processes.append(
            subprocess.Popen(
                [FETCHER, "run"],
                env={**env, "FETCHER_MODE": "manager", "SERVER_ADDRESS": f"127.0.0.1:{api_port}"},
            )
        )
        worker = subprocess.Popen(
            [FETCHER, "run"], env={**env, "FETCHER_MODE": "worker", "HEALTH_PORT": str(health_port)}
        )
        processes.append(worker)
        base = f"http://127.0.0.1:{api_port}"
        _wait_health(f"{base}/health")
        _wait_health(f"http://127.0.0.1:{health_port}/health")
        idle_kib = _vm_hwm_kib(worker.pid)
        state, elapsed, job_id = _run_job(base, database, reader, password)
        peak_kib = _vm_hwm_kib(worker.pid)
        if state["status"] != "completed":
            raise SystemExit(f"job {state['status']}: {state}")
        size = _result_size(_http("GET", f"{base}/v1/events?type=completed"), job_id)
        verdict = "OK" if peak_kib / 1024 < BOUND_MIB else "OVER THE BOUND"
        print(
            f"mariadb worker: {ROWS:,} rows, result {size / 2**20:.1f} MiB in {elapsed:.1f}s "
            f"= {ROWS / elapsed:,.0f} rows/s; peak RSS {peak_kib / 1024:.1f} MiB "
            f"(idle baseline {idle_kib / 1024:.1f} MiB; bound {BOUND_MIB} MiB: {verdict})"
        )
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(timeout=60)
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{meta_db}" WITH (FORCE)')
        asyncio.run(
            _mariadb(
                [
                    (f"DROP DATABASE IF EXISTS `{database}`", None),
                    ("DROP USER IF EXISTS %s@'%%'", (reader,)),
                ]
            )
        )
        asyncio.run(
            _delete_broker_objects(
                env["RABBITMQ_FETCHER_WORK_QUEUE"], env["RABBITMQ_JOB_EVENTS_EXCHANGE"]
            )
        )
        delete_s3_prefix(bench_prefix(suffix))


if __name__ == "__main__":
    main()
