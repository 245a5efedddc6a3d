"""A job's planning against the size of the schema it reads from (PostgreSQL).

A job names a few tables; the schema may hold thousands. Planning discovered the whole schema
(§3.3 scope) for every job; the PostgreSQL connector now discovers only the named tables
(``NamedDiscovery``). This runs one job of one table of 20 rows through ``Engine.run`` against a
schema of 10 and of ``FETCHER_BENCH_TABLES`` (default 2,000) tables of five columns, with named
discovery and with whole-schema discovery (the same connector with the capability hidden),
alternating, ``FETCHER_BENCH_DISCOVERY_JOBS`` (default 50) jobs each.

    .venv/bin/python bench/discovery_scale.py

Writes ``bench/results/discovery-scale-*.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fetcher_processes import create_postgres, drop_postgres
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.engine import ConnectionDescriptor, Connector, Engine, ExtractionRequest
from fetcher.engine.kit import EngineType
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.types import DiscoveredSchema

TABLES = int(os.environ.get("FETCHER_BENCH_TABLES", "2000"))
JOBS = int(os.environ.get("FETCHER_BENCH_DISCOVERY_JOBS", "50"))
RESULTS = Path(__file__).resolve().parent / "results"


class WholeSchema:
    """A connector with its ``discover_tables`` hidden: planning discovers whole schemas."""

    def __init__(self, inner: Connector) -> None:
        self._inner = inner

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._inner.__aexit__(exc_type, exc, tb)

    async def probe(self) -> None:
        await self._inner.probe()

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        return await self._inner.discover(schemas)

    def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        return self._inner.stream(query)


class WholeSchemaRegistry:
    def __init__(self) -> None:
        self._registry = SqlConnectorRegistry()

    def connector_for(self, connection: ConnectionDescriptor) -> Connector:
        return WholeSchema(self._registry.connector_for(connection))


class NullSink:
    async def write(self, chunk: bytes) -> None:
        return None


def _schema_sql(tables: int) -> str:
    columns = "(id integer, a text, b numeric(12, 2), c timestamptz, d jsonb)"
    created = "".join(f"CREATE TABLE t{n} {columns};\n" for n in range(tables))
    return created + "INSERT INTO t0 SELECT g, 'row', g, now(), '{}' FROM generate_series(1, 20) g;"


async def measure(tables: int) -> dict[str, Any]:
    database = create_postgres("discovery", _schema_sql(tables))
    try:
        descriptor = ConnectionDescriptor(
            config_name="pg",
            type=EngineType.POSTGRESQL,
            host="127.0.0.1",
            port=5432,
            database=database,
            username="postgres",
        )
        request = ExtractionRequest(job_id="bench", mapped_fields={"pg": {"t0": ("*",)}})
        engines = {
            "whole_schema": Engine(WholeSchemaRegistry()),
            "named_tables": Engine(SqlConnectorRegistry()),
        }
        times: dict[str, list[float]] = {label: [] for label in engines}
        for engine in engines.values():  # warm-up
            await engine.run(request, {"pg": descriptor}, NullSink())
        for _ in range(JOBS):
            for label, engine in engines.items():
                started = time.perf_counter()
                await engine.run(request, {"pg": descriptor}, NullSink())
                times[label].append(time.perf_counter() - started)
    finally:
        drop_postgres(database)
    figures: dict[str, Any] = {
        label: round(statistics.median(runs) * 1000, 2) for label, runs in times.items()
    }
    figures["ratio"] = round(figures["named_tables"] / figures["whole_schema"], 3)
    return figures


async def main() -> None:
    results: dict[str, Any] = {"jobs": JOBS}
    print(f"One 20-row table through Engine.run, median of {JOBS} jobs (PostgreSQL):")
    for tables in (10, TABLES):
        figures = await measure(tables)
        results[f"{tables}_tables"] = figures
        print(
            f"  schema of {tables:>5} tables: whole-schema discovery {figures['whole_schema']:7.2f}"
            f" ms, named tables {figures['named_tables']:7.2f} ms ({figures['ratio']:.2f}x)",
            flush=True,
        )
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"discovery-scale-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written {path}")


if __name__ == "__main__":
    asyncio.run(main())
