"""Issue 21: ``GET /v1/fetcher`` page latency at 100,000 stored jobs, on both metadata stores.

For each store (the SQLite file of embedded mode, then a scratch PostgreSQL database on
``FETCHER_BENCH_POSTGRES_DSN``'s server, default 127.0.0.1:5432), the script migrates a fresh
store, bulk-loads ``FETCHER_BENCH_JOBS`` jobs (default 100,000: 90 % in one tenant, 10 % in
another; 80 % completed, 15 % failed, 5 % pending; five products; twenty connections; one a
second), then serves the production app with uvicorn on a loopback port and times, over HTTP,
``FETCHER_BENCH_REQUESTS`` requests (default 200) of each case:

* ``first page, status=failed``: the newest 20 failed jobs;
* ``first page, connectionId``: the newest 20 jobs of one connection;
* ``deep page, status=failed``: the page after the 10,000th failed job (its cursor reached by
  following ``nextCursor`` with ``limit=100``);
* ``deep page, unfiltered``: the page after the 50,000th job.

It also times ``GET /health`` the same way: the floor of one HTTP round trip on this machine
at that moment. It prints p50/p99 per case (target: p99 < 50 ms) and writes JSON under
``bench/results/``. Run: ``.venv/bin/python -m bench.job_list``. Everything binds
127.0.0.1; the scratch database is dropped at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import uvicorn

from bench.support import ADMIN, KEY, create_postgres, drop_postgres, free_port, write_report
from fetcher.adapters.store import _common as c
from fetcher.adapters.store.postgres import PostgresMetadataStore
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.bootstrap import Messaging, assemble_runtime
from fetcher.engine.testing import FakeRegistry
from fetcher.manager.app import create_app
from fetcher.services.records import JobRecord, JobStatus
from fetcher.services.testing import RecordingPublisher
from fetcher.settings import Settings

JOBS = int(os.environ.get("FETCHER_BENCH_JOBS", "100000"))
REQUESTS = int(os.environ.get("FETCHER_BENCH_REQUESTS", "200"))
T0 = datetime(2026, 1, 1, tzinfo=UTC)
CONNECTIONS = [f"0190{n:04x}-0000-7000-8000-{n:012x}" for n in range(20)]
PRODUCTS = ["payments", "billing", "ledger", "risk", "growth"]


def _status(n: int) -> JobStatus:
    bucket = n % 20
    return "pending" if bucket == 0 else "failed" if bucket <= 3 else "completed"


def _job(n: int) -> JobRecord:
    created = T0 + timedelta(seconds=n)
    status = _status(n)
    return JobRecord(
        id=f"{n:08x}-0000-7000-8000-{secrets.token_hex(6)}",
        status=status,
        request_hash=secrets.token_hex(32),
        mapped_fields_json='{"pg_main":{"public.orders":["id","total","note"]}}',
        metadata_json=json.dumps({"source": PRODUCTS[n % 5], "batch": n}),
        created_at=created,
        updated_at=created,
        connection_ids={"pg_main": CONNECTIONS[n % 20]},
        dedup_active=status == "pending",
        completed_at=None if status == "pending" else created,
        error="ERROR: relation does not exist" if status == "failed" else None,
        tenant="" if n % 10 else "acme",
    )


def _rows(ts: Callable[[datetime], Any]) -> list[dict[str, Any]]:
    return [c.job_params(_job(n), ts) for n in range(JOBS)]


def _insert_sql(param: Callable[[str], str], columns: list[str]) -> str:
    values = ", ".join(param(name) for name in columns)
    return f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({values})"


def _load_sqlite(path: Path) -> None:
    rows = _rows(c.ts_text)
    with sqlite3.connect(path) as conn:
        conn.executemany(_insert_sql(lambda n: f":{n}", list(rows[0])), rows)
        conn.execute("ANALYZE")


async def _load_postgres(dsn: str) -> None:
    rows = _rows(c.utc_ms)
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        async with conn.cursor() as cur:
            await cur.executemany(_insert_sql(lambda n: f"%({n})s", list(rows[0])), rows)
        await conn.execute("ANALYZE")
        await conn.commit()


@asynccontextmanager
async def _serving(settings: Settings, store: Any) -> AsyncIterator[str]:
    runtime = assemble_runtime(
        settings,
        store=store,
        registry=FakeRegistry({}),
        messaging=Messaging(work_publisher=RecordingPublisher()),
    )
    runtime.lifecycle.started.set()
    port = free_port()
    config = uvicorn.Config(create_app(runtime), host="127.0.0.1", port=port, log_level="error")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn offers no event for it
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def _cursor_after(http: httpx.AsyncClient, depth: int, **query: str) -> str:
    cursor = None
    for _ in range(depth // 100):
        params = {**query, "limit": "100", **({"cursor": cursor} if cursor else {})}
        page = (await http.get("/v1/fetcher", params=params)).json()
        cursor = page["nextCursor"]
    assert isinstance(cursor, str)
    return cursor


async def _time(
    http: httpx.AsyncClient, params: dict[str, str], path: str = "/v1/fetcher"
) -> dict[str, float]:
    samples = []
    for _ in range(REQUESTS):
        begun = time.perf_counter()
        response = await http.get(path, params=params)
        samples.append((time.perf_counter() - begun) * 1000)
        assert response.status_code == 200, response.text
        assert path != "/v1/fetcher" or len(response.json()["items"]) == 20
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 2),
        "p99_ms": round(samples[int(len(samples) * 0.99) - 1], 2),
    }


async def _cases(base_url: str) -> dict[str, dict[str, float]]:
    async with httpx.AsyncClient(base_url=base_url, timeout=30.0) as http:
        failed_depth, all_depth = JOBS // 10, JOBS // 2  # 10,000 and 50,000 at 100,000 jobs
        deep_failed = await _cursor_after(http, failed_depth, status="failed")
        deep_all = await _cursor_after(http, all_depth)
        cases = {
            "first page, status=failed": {"status": "failed"},
            "first page, connectionId": {"connectionId": CONNECTIONS[7]},
            f"deep page, status=failed (after {failed_depth:,})": {
                "status": "failed",
                "cursor": deep_failed,
            },
            f"deep page, unfiltered (after {all_depth:,})": {"cursor": deep_all},
        }
        figures = {"floor: GET /health": await _time(http, {}, "/health")}
        for name, params in cases.items():
            figures[name] = await _time(http, params)
        return figures


async def _bench_sqlite(folder: Path) -> dict[str, dict[str, float]]:
    path = folder / "meta.db"
    store = SqliteMetadataStore(path)
    await store.open()
    await store.migrate()
    await asyncio.to_thread(_load_sqlite, path)
    env = {"FETCHER_MODE": "embedded", "APP_ENC_KEY": KEY, "DATABASE_URL": f"sqlite:///{path}"}
    try:
        async with _serving(Settings.from_env(env), store) as url:
            return await _cases(url)
    finally:
        await store.close()


async def _bench_postgres() -> dict[str, dict[str, float]]:
    name = create_postgres("jobs", "SELECT 1")
    dsn = psycopg.conninfo.make_conninfo(ADMIN, dbname=name)
    store = PostgresMetadataStore(dsn)
    try:
        await store.open()
        await store.migrate()
        await _load_postgres(dsn)
        env = {
            "FETCHER_MODE": "manager",
            "APP_ENC_KEY": KEY,
            "DATABASE_URL": "postgresql://bench@127.0.0.1/bench",
            "RABBITMQ_HOST": "127.0.0.1",
        }
        async with _serving(Settings.from_env(env), store) as url:
            return await _cases(url)
    finally:
        await store.close()
        drop_postgres(name)


async def main() -> None:
    results: dict[str, Any] = {"jobs": JOBS, "requests_per_case": REQUESTS}
    with tempfile.TemporaryDirectory() as folder:
        results["sqlite"] = await _bench_sqlite(Path(folder))
    results["postgres"] = await _bench_postgres()
    for store in ("sqlite", "postgres"):
        for case, figures in results[store].items():
            p50, p99 = figures["p50_ms"], figures["p99_ms"]
            print(f"{store:8} {case:42} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms")
    write_report("job_list", results)


if __name__ == "__main__":
    asyncio.run(main())
