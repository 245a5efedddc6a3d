"""One connection per datasource and job: ``Engine.run`` (planned and extracted on one
connection, ``fetcher.engine.reuse``) against ``Engine.plan`` then ``Engine.execute`` (a connect
for each, as the Worker did), on a small table of PostgreSQL and of MariaDB, alternating, in one
process. A small job is where a connect weighs most; over a network with TLS it weighs more than
on this machine's loopback.

    .venv/bin/python -m bench.connection_reuse

``FETCHER_BENCH_REUSE_JOBS`` (default 200) jobs per variant and engine. Prints the median and
p90 job time, connects per job and the ratio; writes ``bench/results/connection-reuse-*.json``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

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

JOBS = int(os.environ.get("FETCHER_BENCH_REUSE_JOBS", "200"))
_TABLE = "CREATE TABLE small (id INTEGER PRIMARY KEY, name VARCHAR(40));"
_ROWS = "INSERT INTO small VALUES " + ", ".join(f"({n}, 'row {n}')" for n in range(1, 21)) + ";"


class CountingRegistry:
    """The SQL registry, counting the connectors it builds (one per connect)."""

    def __init__(self) -> None:
        self._registry = SqlConnectorRegistry()
        self.connects = 0

    def connector_for(self, connection: ConnectionDescriptor) -> Connector:
        self.connects += 1
        return self._registry.connector_for(connection)


async def _variants(
    engine: Engine, request: ExtractionRequest, connections: dict[str, ConnectionDescriptor]
) -> dict[str, Callable[[], Awaitable[object]]]:
    async def reused() -> object:
        return await engine.run(request, connections, NullSink())

    async def apart() -> object:
        plan = await engine.plan(request, connections)
        return await engine.execute(plan, NullSink())

    return {"plan_then_execute": apart, "run_one_connection": reused}


async def measure(name: str, descriptor: ConnectionDescriptor) -> dict[str, Any]:
    registry = CountingRegistry()
    engine = Engine(registry)
    request = ExtractionRequest(job_id="bench", mapped_fields={name: {"small": ("*",)}})
    variants = await _variants(engine, request, {name: descriptor})
    times: dict[str, list[float]] = {label: [] for label in variants}
    connects: dict[str, int] = dict.fromkeys(variants, 0)
    for job in variants.values():  # warm-up
        await job()
    for _ in range(JOBS):
        for label, job in variants.items():
            before = registry.connects
            started = time.perf_counter()
            await job()
            times[label].append(time.perf_counter() - started)
            connects[label] += registry.connects - before
    figures: dict[str, Any] = {}
    for label, runs in times.items():
        ordered = sorted(runs)
        figures[label] = {
            "median_ms": round(statistics.median(ordered) * 1000, 2),
            "p90_ms": round(ordered[int(len(ordered) * 0.9)] * 1000, 2),
            "connects_per_job": connects[label] / JOBS,
        }
    base = figures["plan_then_execute"]["median_ms"]
    figures["time_ratio"] = round(figures["run_one_connection"]["median_ms"] / base, 3)
    return figures


def _print(engine: str, figures: dict[str, Any]) -> None:
    print(f"{engine}, {JOBS} small jobs per variant, alternating:")
    for label in ("plan_then_execute", "run_one_connection"):
        f = figures[label]
        print(
            f"  {label:<20} median {f['median_ms']:7.2f} ms  p90 {f['p90_ms']:7.2f} ms"
            f"  connects/job {f['connects_per_job']:.0f}"
        )
    print(f"  run_one_connection / plan_then_execute: {figures['time_ratio']:.2f}x", flush=True)


async def main() -> None:
    results: dict[str, Any] = {"jobs": JOBS}
    pg = create_postgres("reuse", _TABLE + _ROWS)
    try:
        descriptor = postgres_descriptor(pg)
        results["postgresql"] = await measure("pg", descriptor)
        _print("PostgreSQL", results["postgresql"])
    finally:
        drop_postgres(pg)
    database, reader, password = create_mariadb(_TABLE + _ROWS)
    try:
        descriptor = mariadb_descriptor(database, reader, password)
        results["mariadb"] = await measure("maria", descriptor)
        _print("MariaDB", results["mariadb"])
    finally:
        drop_mariadb(database, reader)
    write_report("connection-reuse", results)


if __name__ == "__main__":
    asyncio.run(main())
