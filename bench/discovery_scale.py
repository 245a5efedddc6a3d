"""A job's planning against the size of the schema it reads from (PostgreSQL, MariaDB,
MongoDB).

A job names a few tables; the schema may hold thousands. Planning discovered the whole schema
(§3.3 scope) for every job, and on MongoDB sampled every collection of the database; the
PostgreSQL, MySQL/MariaDB and MongoDB connectors now discover only the named tables
(``NamedDiscovery``). This runs one job of one table of 20 rows through ``Engine.run`` against a
PostgreSQL and a MariaDB schema of 10 and of ``FETCHER_BENCH_TABLES`` (default 2,000) tables of
five columns (MariaDB: a fifth of the jobs, whole discovery takes seconds), and against a MongoDB
database of 10 and of ``FETCHER_BENCH_COLLECTIONS`` (default 200) collections of 100 documents,
with named discovery and with whole-schema discovery (the same connector with the capability
hidden), alternating, ``FETCHER_BENCH_DISCOVERY_JOBS`` (default 50) jobs each.

    scripts/mongo-server.sh start    # the nx-27017 wire server on 127.0.0.1:27018
    .venv/bin/python -m bench.discovery_scale

Writes ``bench/results/discovery-scale-*.json``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Self

from bench.support import (
    NullSink,
    create_mariadb,
    create_postgres,
    drop_mariadb,
    drop_postgres,
    mariadb_descriptor,
    postgres_descriptor,
    write_report,
)
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.engine import ConnectionDescriptor, Connector, Engine, ExtractionRequest
from fetcher.engine.kit import EngineType
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.types import DiscoveredSchema

TABLES = int(os.environ.get("FETCHER_BENCH_TABLES", "2000"))
COLLECTIONS = int(os.environ.get("FETCHER_BENCH_COLLECTIONS", "200"))
MONGODB_PORT = int(os.environ.get("FETCHER_TEST_MONGODB_PORT", "27018"))
JOBS = int(os.environ.get("FETCHER_BENCH_DISCOVERY_JOBS", "50"))


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


def _schema_sql(tables: int) -> str:
    columns = "(id integer, a text, b numeric(12, 2), c timestamptz, d jsonb)"
    created = "".join(f"CREATE TABLE t{n} {columns};\n" for n in range(tables))
    return created + "INSERT INTO t0 SELECT g, 'row', g, now(), '{}' FROM generate_series(1, 20) g;"


async def measure_postgres(tables: int) -> dict[str, Any]:
    database = create_postgres("discovery", _schema_sql(tables))
    try:
        descriptor = postgres_descriptor(database)
        return await measure(descriptor)
    finally:
        drop_postgres(database)


async def measure_mariadb(tables: int) -> dict[str, Any]:
    columns = "(id integer, a text, b decimal(12, 2), c datetime, d json)"
    created = "".join(f"CREATE TABLE t{n} {columns};\n" for n in range(tables))
    rows = "INSERT INTO t0 SELECT seq, 'row', seq, now(), '{}' FROM seq_1_to_20;"
    database, reader, password = create_mariadb(created + rows)
    try:
        descriptor = mariadb_descriptor(database, reader, password, name="pg")
        return await measure(descriptor, jobs=max(1, JOBS // 5))  # whole discovery takes seconds
    finally:
        drop_mariadb(database, reader)


async def measure_mongodb(collections: int) -> dict[str, Any]:
    from pymongo import AsyncMongoClient

    database = f"fetcher_bench_discovery_{collections}"
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        "127.0.0.1", MONGODB_PORT, directConnection=True
    )
    try:
        await client.drop_database(database)
        for n in range(collections):
            documents = [{"id": i, "a": "row", "b": i * 1.5} for i in range(100 if n else 20)]
            await client[database][f"t{n}"].insert_many(documents)
        descriptor = ConnectionDescriptor(
            config_name="pg",  # the job's datasource name
            type=EngineType.MONGODB,
            host="127.0.0.1",
            port=MONGODB_PORT,
            database=database,
        )
        return await measure(descriptor)
    finally:
        await client.drop_database(database)
        await client.close()


async def measure(descriptor: ConnectionDescriptor, jobs: int = JOBS) -> dict[str, Any]:
    """Median job time with whole-schema and with named discovery, alternating."""
    request = ExtractionRequest(job_id="bench", mapped_fields={"pg": {"t0": ("*",)}})
    engines = {
        "whole_schema": Engine(WholeSchemaRegistry()),
        "named_tables": Engine(SqlConnectorRegistry()),
    }
    times: dict[str, list[float]] = {label: [] for label in engines}
    for engine in engines.values():  # warm-up
        await engine.run(request, {"pg": descriptor}, NullSink())
    for _ in range(jobs):
        for label, engine in engines.items():
            started = time.perf_counter()
            await engine.run(request, {"pg": descriptor}, NullSink())
            times[label].append(time.perf_counter() - started)
    figures: dict[str, Any] = {
        label: round(statistics.median(runs) * 1000, 2) for label, runs in times.items()
    }
    figures["ratio"] = round(figures["named_tables"] / figures["whole_schema"], 3)
    return figures


async def main() -> None:
    results: dict[str, Any] = {"jobs": JOBS}
    print(f"One 20-row table through Engine.run, median of {JOBS} jobs:")
    parts: list[tuple[str, str, Callable[[int], Awaitable[dict[str, Any]]], int]] = [
        ("postgresql", "tables", measure_postgres, n) for n in (10, TABLES)
    ]
    parts += [("mariadb", "tables", measure_mariadb, n) for n in (10, TABLES)]
    parts += [("mongodb", "collections", measure_mongodb, n) for n in (10, COLLECTIONS)]
    for engine, unit, run, size in parts:
        figures = await run(size)
        results[f"{engine}_{size}_{unit}"] = figures
        print(
            f"  {engine:<10} {size:>5} {unit:<11}: whole-schema discovery"
            f" {figures['whole_schema']:8.2f} ms, named tables {figures['named_tables']:7.2f} ms"
            f" ({figures['ratio']:.2f}x)",
            flush=True,
        )
    write_report("discovery-scale", results)


if __name__ == "__main__":
    asyncio.run(main())
