"""Peak RSS of a real Worker process while it produces a ≥ 100 MiB result (issue: bounded memory).

Starts a Manager and a Worker (``fetcher run``) against the machine's PostgreSQL, RabbitMQ and
the loopback S3 server (``scripts/s3-server.sh start``), extracts a generated table whose
document is about 110 MiB, and reads the Worker's ``VmHWM`` (peak resident set) from
``/proc``. The baseline is the same Worker's ``VmHWM`` right after start-up, measured in the
same run. Run: ``.venv/bin/python bench/worker_memory.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import aio_pika
import psycopg

ADMIN = os.environ.get(
    "FETCHER_BENCH_POSTGRES_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test"
)
ROWS = int(os.environ.get("FETCHER_BENCH_MEMORY_ROWS", "600000"))
FETCHER = str(Path(sys.executable).with_name("fetcher"))
KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="


S3_ENDPOINT = os.environ.get("FETCHER_TEST_S3_ENDPOINT", "http://127.0.0.1:8333")
S3_BUCKET = os.environ.get("FETCHER_TEST_S3_BUCKET", "fetcher-test")
S3_ACCESS_KEY = os.environ.get("FETCHER_TEST_S3_ACCESS_KEY", "fetcher-test-access")
S3_SECRET_KEY = os.environ.get("FETCHER_TEST_S3_SECRET_KEY", "fetcher-test-secret-0123456789")


def bench_prefix(suffix: str) -> str:
    """The object-key prefix of one bench run's Worker (``OBJECT_STORAGE_KEY_PREFIX``): every
    object it stores is under it, and :func:`delete_s3_prefix` removes them afterwards."""
    return f"fetcher-bench-{suffix}"


def delete_s3_prefix(prefix: str) -> int:
    """Leave the shared test bucket as it was: delete every object under ``prefix/`` and abort
    any unfinished multipart upload there; returns the number of objects deleted."""
    import boto3  # type: ignore[import-untyped]  # boto3 comes with aioboto3 (the s3 extra)
    from botocore.config import Config  # type: ignore[import-untyped]

    client = boto3.client(
        "s3",
        endpoint_url=S3_ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id=S3_ACCESS_KEY,
        aws_secret_access_key=S3_SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}),
    )
    deleted = 0
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=S3_BUCKET, Prefix=f"{prefix}/"
    ):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=S3_BUCKET, Delete={"Objects": keys, "Quiet": True})
            deleted += len(keys)
    uploads = client.list_multipart_uploads(Bucket=S3_BUCKET, Prefix=f"{prefix}/")
    for upload in uploads.get("Uploads", []):
        client.abort_multipart_upload(
            Bucket=S3_BUCKET, Key=upload["Key"], UploadId=upload["UploadId"]
        )
    vacuum_s3_server()
    return deleted


def vacuum_s3_server() -> None:
    """Give the local SeaweedFS (``scripts/s3-server.sh``: master port = S3 port + 1000) its
    space and volume slots back after the bench deleted its objects. Deleted bytes stay in its
    64 MB volumes until a vacuum, and emptied volumes keep their slot until deleted: a dozen
    500 k-row runs (~2.5 GB written each) used up all 200 slots, after which every write to a
    new bucket, then to any bucket, failed with ``InternalError`` (2026-12-01). Best effort."""
    parsed = urllib.parse.urlsplit(S3_ENDPOINT)
    if parsed.hostname not in ("127.0.0.1", "localhost") or parsed.port is None:
        return
    master = f"{parsed.hostname}:{parsed.port + 1000}"
    try:
        url = f"http://{master}/vol/vacuum?garbageThreshold=0.1"
        with urllib.request.urlopen(url, timeout=300) as response:
            response.read()
        weed = Path(sys.executable).with_name("weed")
        if weed.exists():
            subprocess.run(
                [str(weed), "shell", f"-master={master}"],
                input="lock\nvolume.deleteEmpty -quietFor=1s -force\nunlock\n",
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"  (SeaweedFS clean-up failed: {exc})", flush=True)


def distributed_env(meta_db: str, suffix: str) -> dict[str, str]:
    """The metadata store, broker and S3 variables of a bench Manager/Worker pair: the scratch
    metadata database ``meta_db``, a work queue and events exchange named with ``suffix``, and
    the test S3 server (``scripts/s3-server.sh``), with the objects under
    :func:`bench_prefix` (``suffix``) so that they can be deleted after the run."""
    return {
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{meta_db}",
        "RABBITMQ_HOST": "127.0.0.1",
        "RABBITMQ_FETCHER_WORK_QUEUE": f"fetcher.bench.{suffix}",
        "RABBITMQ_JOB_EVENTS_EXCHANGE": f"fetcher.bench.events.{suffix}",
        "STREAMING_ENABLED": "true",
        "STREAMING_CLOUDEVENTS_SOURCE": "//lerian.fetcher/bench",
        "OBJECT_STORAGE_ENDPOINT": S3_ENDPOINT,
        "OBJECT_STORAGE_BUCKET": S3_BUCKET,
        "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "OBJECT_STORAGE_SECRET_KEY": S3_SECRET_KEY,
        "OBJECT_STORAGE_USE_PATH_STYLE": "true",
        "OBJECT_STORAGE_KEY_PREFIX": bench_prefix(suffix),
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http(
    method: str, url: str, body: object = None, headers: dict[str, str] | None = None
) -> dict[str, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def _result_size(feed: dict[str, object], job_id: object) -> int:
    """``result.size_bytes`` of the job's ``job.completed`` item in an event-feed page."""
    items = feed["items"]
    assert isinstance(items, list)
    for item in items:
        if item["data"]["job_id"] == job_id:
            return int(item["data"]["result"]["size_bytes"])
    raise RuntimeError("no job.completed event for the job")


def _vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def _wait_health(url: str) -> None:
    for _ in range(300):
        try:
            _http("GET", url)
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} never became healthy")


def main() -> None:
    suffix = uuid.uuid4().hex[:8]
    meta_db, source_db = f"fetcher_bench_meta_{suffix}", f"fetcher_bench_src_{suffix}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{meta_db}"')
        admin.execute(f'CREATE DATABASE "{source_db}"')
    source = psycopg.conninfo.make_conninfo(ADMIN, dbname=source_db)
    with psycopg.connect(source, autocommit=True) as db:
        db.execute(
            "CREATE TABLE ledger AS SELECT g AS id, md5(g::text) || md5((g+1)::text) AS memo, "
            "(g * 37 % 100000) / 100.0::numeric(12,2) AS amount, "
            "timestamptz '2026-01-01' + g * interval '1 second' AS booked_at "
            f"FROM generate_series(1, {ROWS}) g"
        )
    api_port, health_port = _free_port(), _free_port()
    env = {
        **os.environ,
        "APP_ENC_KEY": KEY,
        **distributed_env(meta_db, suffix),
        "READYZ_DRAIN_DELAY_SEC": "1",
        "LOG_LEVEL": "warn",
    }
    manager = subprocess.Popen(
        [FETCHER, "run"],
        env={**env, "FETCHER_MODE": "manager", "SERVER_ADDRESS": f"127.0.0.1:{api_port}"},
    )
    worker = subprocess.Popen(
        [FETCHER, "run"], env={**env, "FETCHER_MODE": "worker", "HEALTH_PORT": str(health_port)}
    )
    try:
        base = f"http://127.0.0.1:{api_port}"
        _wait_health(f"{base}/health")
        _wait_health(f"http://127.0.0.1:{health_port}/health")
        idle_kib = _vm_hwm_kib(worker.pid)
        _http(
            "POST",
            f"{base}/v1/management/connections",
            {
                "configName": "bench_pg",
                "type": "POSTGRESQL",
                "host": "127.0.0.1",
                "port": 5432,
                "databaseName": source_db,
                "userName": "postgres",
                "password": "trust-auth",
            },
            {"X-Product-Name": "bench"},
        )
        job = _http(
            "POST",
            f"{base}/v1/fetcher",
            {
                "dataRequest": {"mappedFields": {"bench_pg": {"ledger": ["*"]}}},
                "metadata": {"source": "bench"},
            },
        )
        began = time.monotonic()
        while True:
            state = _http("GET", f"{base}/v1/fetcher/{job['jobId']}")
            if state["status"] in ("completed", "failed"):
                break
            time.sleep(0.5)
        elapsed = time.monotonic() - began
        peak_kib = _vm_hwm_kib(worker.pid)
        size = _result_size(_http("GET", f"{base}/v1/events?type=completed"), job["jobId"])
        print(
            f"worker memory: status {state['status']}, "
            f"result {size / 2**20:.1f} MiB in {elapsed:.1f}s; "
            f"peak RSS {peak_kib / 1024:.1f} MiB (idle baseline {idle_kib / 1024:.1f} MiB, "
            f"+{(peak_kib - idle_kib) / 1024:.1f} MiB for the job; bound 150 MiB)"
        )
    finally:
        for process in (manager, worker):
            process.send_signal(signal.SIGTERM)
        for process in (manager, worker):
            process.wait(timeout=60)
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{meta_db}" WITH (FORCE)')
            admin.execute(f'DROP DATABASE IF EXISTS "{source_db}" WITH (FORCE)')
        asyncio.run(
            _delete_broker_objects(
                env["RABBITMQ_FETCHER_WORK_QUEUE"], env["RABBITMQ_JOB_EVENTS_EXCHANGE"]
            )
        )
        delete_s3_prefix(bench_prefix(suffix))


async def _delete_broker_objects(queue: str, exchange: str) -> None:
    """Leave the shared broker as it was: this run's work queue and events exchange go."""
    connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
    async with connection:
        channel = await connection.channel()
        await channel.queue_delete(queue)
        await channel.exchange_delete(exchange)


if __name__ == "__main__":
    main()
