"""PostgreSQL → Engine → null sink, against a plain psycopg fetch of the same rows.

Needs the machine's PostgreSQL (``FETCHER_BENCH_POSTGRES_DSN``, default the test server).
"""

from __future__ import annotations

import asyncio
import os
import time

import psycopg

from fetcher.adapters.sql.postgres import PostgresConnector
from fetcher.engine import ConnectionDescriptor, Engine, ExtractionRequest
from fetcher.engine.types import EngineType

ROWS = int(os.environ.get("FETCHER_BENCH_ROWS", "500000"))
DSN = os.environ.get(
    "FETCHER_BENCH_POSTGRES_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test"
)
TABLE = "fetcher_bench_ledger"


class _NullSink:
    def __init__(self) -> None:
        self.size = 0

    async def write(self, chunk: bytes) -> None:
        self.size += len(chunk)


class _Registry:
    def connector_for(self, connection: ConnectionDescriptor) -> PostgresConnector:
        return PostgresConnector(connection)


def _prepare() -> None:
    with psycopg.connect(DSN, autocommit=True) as db:
        db.execute(f"DROP TABLE IF EXISTS {TABLE}")
        db.execute(
            f"CREATE TABLE {TABLE} AS SELECT g AS id, 'ACC-' || (g % 977) AS account, "
            "(g * 37 % 100000) / 100.0::numeric(12,2) AS amount, "
            "timestamptz '2026-01-01' + g * interval '1 second' AS booked_at, "
            "CASE WHEN g % 5 = 0 THEN 'memo ' || g END AS memo "
            f"FROM generate_series(1, {ROWS}) g"
        )


async def _baseline() -> float:
    begin = time.perf_counter()
    async with await psycopg.AsyncConnection.connect(DSN) as conn, conn.cursor(name="b") as cur:
        await cur.execute(f"SELECT id, account, amount, booked_at, memo FROM {TABLE}")
        while await cur.fetchmany(10_000):
            pass
    return time.perf_counter() - begin


async def _engine() -> tuple[float, int]:
    params = psycopg.conninfo.conninfo_to_dict(DSN)
    descriptor = ConnectionDescriptor(
        config_name="bench",
        type=EngineType.POSTGRESQL,
        host=str(params["host"]),
        port=int(str(params["port"])),
        database=str(params["dbname"]),
        username=str(params["user"]),
        password=str(params.get("password", "")) or None,
    )
    request = ExtractionRequest(job_id="bench", mapped_fields={"bench": {TABLE: ("*",)}})
    sink = _NullSink()
    begin = time.perf_counter()
    await Engine(_Registry()).run(request, {"bench": descriptor}, sink)
    return time.perf_counter() - begin, sink.size


def main() -> None:
    _prepare()
    baseline = asyncio.run(_baseline())
    engine, size = asyncio.run(_engine())
    print(
        f"extraction: {ROWS} rows, {size / 2**20:.1f} MiB document — engine {engine:.2f}s "
        f"({ROWS / engine:,.0f} rows/s), psycopg fetch baseline {baseline:.2f}s, "
        f"ratio {engine / baseline:.2f}x the baseline's time"
    )
    with psycopg.connect(DSN, autocommit=True) as db:
        db.execute(f"DROP TABLE IF EXISTS {TABLE}")
