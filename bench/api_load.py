"""Fixed-rate load on ``POST /v1/fetcher`` (issue 12): p50/p99 latency and errors.

Starts a Manager and a Worker (``fetcher run``, as in :mod:`bench.fetcher_processes`), creates
a stored PostgreSQL connection to a live scratch database with a small table, then, for each
rate of ``FETCHER_BENCH_LOAD_RATES`` (default ``50,100`` requests/s) and for
``FETCHER_BENCH_LOAD_SECONDS`` (default 60) each:

* ``new``: every request has a fresh ``correlationId``, so each one creates a job (202);
* ``duplicate``: every request repeats one body whose job already exists (200, §3.8).

The generator is open-loop: request *i* is sent at ``start + i / rate`` whatever happened to the
earlier ones, and its latency is measured from that scheduled time, so a slow server cannot
hide its queueing by slowing the client down (no coordinated omission). Connections are kept
alive (httpx pool). An error is any other status or a transport failure. The client runs on
the same two cores as the server: figures are from a shared, noisy machine.
Targets: new-job p99 < 100 ms and duplicate p99 < 20 ms at 50 req/s, 0 errors.
Run: ``.venv/bin/python bench/api_load.py``; JSON goes under ``bench/results/``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import secrets
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fetcher_processes import FetcherProcesses, create_postgres, drop_postgres

RATES = [int(r) for r in os.environ.get("FETCHER_BENCH_LOAD_RATES", "50,100").split(",") if r]
SECONDS = float(os.environ.get("FETCHER_BENCH_LOAD_SECONDS", "60"))
RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"new": 0.100, "duplicate": 0.020}
_SOURCE = """
CREATE TABLE accounts (id int PRIMARY KEY, email text NOT NULL, balance numeric(12,2));
INSERT INTO accounts SELECT g, 'a' || g || '@example.com', g * 1.25 FROM generate_series(1, 20) g;
"""


def _body(correlation: str) -> dict[str, Any]:
    return {
        "dataRequest": {"mappedFields": {"bench_pg": {"accounts": ["id", "email", "balance"]}}},
        "metadata": {"source": "bench", "correlationId": correlation},
    }


async def _one(
    client: httpx.AsyncClient, scheduled: float, body: dict[str, Any], expected: int
) -> tuple[float, str]:
    """(latency from the scheduled send time, the status code or the transport error's name)."""
    loop = asyncio.get_running_loop()
    try:
        response = await client.post("/v1/fetcher", json=body)
        outcome = str(response.status_code)
    except httpx.HTTPError as exc:
        outcome = type(exc).__name__
    return loop.time() - scheduled, outcome


async def fixed_rate(client: httpx.AsyncClient, rate: int, kind: str) -> dict[str, Any]:
    """One open-loop run of ``SECONDS`` at ``rate`` requests/s."""
    loop = asyncio.get_running_loop()
    duplicate = _body(f"dup-{secrets.token_hex(6)}")
    if kind == "duplicate":  # the original job: every request of the run is its duplicate
        first = await client.post("/v1/fetcher", json=duplicate)
        if first.status_code != 202:
            raise RuntimeError(f"could not create the original job: {first.status_code}")
    expected = 200 if kind == "duplicate" else 202
    count = int(rate * SECONDS)
    start = loop.time() + 0.1
    tasks = []
    for i in range(count):
        scheduled = start + i / rate
        await asyncio.sleep(max(0.0, scheduled - loop.time()))
        body = duplicate if kind == "duplicate" else _body(f"new-{secrets.token_hex(8)}")
        tasks.append(asyncio.create_task(_one(client, scheduled, body, expected)))
    outcomes = await asyncio.gather(*tasks)
    latencies = sorted(latency for latency, _ in outcomes)
    errors = collections.Counter(o for _, o in outcomes if o != str(expected))
    return _figures(kind, rate, latencies, errors)


def _figures(
    kind: str, rate: int, latencies: list[float], errors: collections.Counter[str]
) -> dict[str, Any]:
    def quantile(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))]

    seconds = (statistics.median(latencies), quantile(0.99), latencies[-1])
    p50, p99, worst = (round(x * 1000, 1) for x in seconds)
    figures = {
        "kind": kind,
        "rate": rate,
        "seconds": SECONDS,
        "requests": len(latencies),
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "p50_ms": p50,
        "p99_ms": p99,
        "max_ms": worst,
    }
    met = p99 < TARGETS[kind] * 1000 and not errors
    verdict = "" if rate != 50 else (" ok" if met else " MISS")
    print(
        f"  {kind:<9} {rate:>4} req/s: p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  max {worst:7.1f} ms"
        f"  errors {sum(errors.values())}/{len(latencies)} {dict(errors) or ''}{verdict}",
        flush=True,
    )
    return figures


async def _run(base: str) -> list[dict[str, Any]]:
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30.0) as client:
        figures = []
        for rate in RATES:
            for kind in ("new", "duplicate"):
                figures.append(await fixed_rate(client, rate, kind))
        return figures


def main() -> int:
    database = create_postgres("load", _SOURCE)
    try:
        with FetcherProcesses("worker") as processes:
            processes.connect_postgres("bench_pg", database)
            print(f"POST /v1/fetcher, open loop, {SECONDS:.0f} s per run:", flush=True)
            figures = asyncio.run(_run(processes.base))
    finally:
        drop_postgres(database)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"api-load-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps({"runs": figures, "targets_ms": TARGETS}, indent=2) + "\n")
    print(f"written {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
