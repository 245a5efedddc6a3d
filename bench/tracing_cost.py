"""What tracing costs (issue 22, scope 5): off, on and sampled, on and unsampled, in one run.

Three variants of the same processes, differing only in their trace settings:

* ``off``: ``TRACING_ENABLED`` unset (no SDK at all; the target is "within noise");
* ``on_sampled``: ``TRACING_ENABLED=true``, the default parent-based sampler and the SDK's
  batch span processor exporting over OTLP/HTTP to a receiver on loopback
  (:class:`tests.otlp_receiver.OtlpReceiver`, in this process: it parses and counts spans);
* ``on_unsampled``: ``TRACING_ENABLED=true`` with ``OTEL_TRACES_SAMPLER=always_off`` (the
  SDK runs, context propagates, nothing is recorded; its own receiver must count 0 spans).

Parts (``FETCHER_BENCH_TRACING_PARTS``, default ``extraction,api``):

* ``extraction``: the ledger of :mod:`bench.extraction` (``FETCHER_BENCH_ROWS`` rows, default
  500 000) extracted by one embedded process per variant, its job runner and alternating
  repetitions (``FETCHER_BENCH_REPS``, default 3): ``completedAt − createdAt`` and the
  process's CPU seconds;
* ``api``: the open-loop ``POST /v1/fetcher`` load of :mod:`bench.api_load` (new jobs at the
  first rate of ``FETCHER_BENCH_LOAD_RATES``, ``FETCHER_BENCH_LOAD_SECONDS`` per run) against
  one Manager + Worker per variant, the same repetitions alternated: achieved requests/s,
  p50/p99 latency and the Manager's and Worker's CPU milliseconds per request.

Every variant's processes live for the whole part, so each repetition finds them warm. The
table gives each variant's median and its ratio to ``off`` from the same run (the machine is
shared: absolute figures are noisy, same-run ratios less so). JSON goes under
``bench/results/``. Needs PostgreSQL and, for ``api``, RabbitMQ and the S3 server.
Run: ``.venv/bin/python bench/tracing_cost.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.otlp_receiver import OtlpReceiver

from bench import api_load
from bench.extraction import (
    COLUMNS,
    REPS,
    ROWS,
    Run,
    _alternate,
    _fetcher_runner,
    _summaries,
    _warm_up,
    ledger_source,
)
from bench.fetcher_processes import FetcherProcesses, create_postgres, drop_postgres

PARTS = set(os.environ.get("FETCHER_BENCH_TRACING_PARTS", "extraction,api").split(","))
RESULTS = Path(__file__).resolve().parent / "results"
VARIANTS = ("off", "on_sampled", "on_unsampled")


@contextmanager
def receivers() -> Iterator[dict[str, OtlpReceiver]]:
    """One loopback receiver per tracing variant (the unsampled one should stay empty)."""
    started: dict[str, OtlpReceiver] = {}
    try:
        for variant in VARIANTS[1:]:
            started[variant] = OtlpReceiver(keep=False)
        yield started
    finally:
        for receiver in started.values():
            receiver.close()


def variant_env(variant: str, found: dict[str, OtlpReceiver]) -> dict[str, str]:
    """The settings of ``variant``: nothing for ``off``; the SDK's defaults otherwise (the
    batch processor's 5 s schedule included), the endpoint being the variant's receiver."""
    if variant == "off":
        return {}
    env = {"TRACING_ENABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": found[variant].endpoint}
    if variant == "on_unsampled":
        env["OTEL_TRACES_SAMPLER"] = "always_off"
    return env


def _ratios(results: dict[str, dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    """Each variant's ``key`` median over ``off``'s (> 1: more time, CPU or requests/s)."""
    ratios: dict[str, Any] = {}
    for variant in VARIANTS[1:]:
        ratios[variant] = {
            key: round(results[variant][key] / results["off"][key], 3)
            if results["off"].get(key) and results[variant].get(key) is not None
            else None
            for key in keys
        }
    return ratios


def _table(title: str, results: dict[str, dict[str, Any]], keys: tuple[str, ...]) -> None:
    print(f"{title}: median (ratio to off)", flush=True)
    print(f"  {'variant':<14}" + "".join(f"{key:>36}" for key in keys), flush=True)
    ratios = _ratios(results, keys)
    for variant in VARIANTS:
        cells = []
        for key in keys:
            ratio = ratios.get(variant, {}).get(key) if variant != "off" else 1.0
            value = results[variant].get(key)
            cells.append(f"{value!s:>18} ({ratio if ratio is not None else '-'!s:>6})")
        print(f"  {variant:<14}" + "".join(f"{cell:>36}" for cell in cells), flush=True)


def extraction_part(found: dict[str, OtlpReceiver]) -> dict[str, Any]:
    """The ledger through one embedded process per variant, alternating repetitions."""
    print(f"Extraction, embedded, {ROWS:,} rows, {REPS} alternating repetitions:", flush=True)
    mapped = list(COLUMNS)
    with ledger_source("postgres", ROWS) as register, ExitStack() as stack:
        contenders: dict[str, Callable[[], Run]] = {}
        for variant in VARIANTS:
            processes = stack.enter_context(
                FetcherProcesses("embedded", worker_nice=0, **variant_env(variant, found))
            )
            register(processes)
            _warm_up(processes, "bench_src")  # starts the embedded encoder process
            contenders[variant] = _fetcher_runner(
                processes, {"bench_src": {"ledger": mapped}}, None, ROWS
            )
        results = _summaries(_alternate(contenders), ROWS)
    keys = ("median_seconds", "median_cpu_seconds")
    _table("Extraction", results, keys)
    return {"rows": ROWS, "results": results, "ratios": _ratios(results, keys)}


async def _api_run(
    variant: str, processes: FetcherProcesses, meter: api_load.CpuMeter, rate: int
) -> dict[str, Any]:
    """One open-loop run of new jobs; requests/s counts until the last answer arrived."""
    host, port = processes.base.removeprefix("http://").rsplit(":", 1)
    client = api_load.KeepAlivePool(host, int(port))
    try:
        began = time.perf_counter()
        figures = await api_load.fixed_rate(client, rate, "new", meter)
        took = time.perf_counter() - began - 1.1  # fixed_rate's settling sleep and start delay
    finally:
        client.close()
    cpu = figures["cpu_ms_per_request"]
    return {
        "variant": variant,
        "requests_per_second": round(figures["requests"] / took, 1),
        "fetcher_cpu_ms_per_request": round(cpu["manager"] + cpu["worker"], 2),
        **figures,
    }


async def _api_warm_up(processes: FetcherProcesses) -> None:
    """One job, not counted: each stack's first request (and the Worker's first job, and the
    exporter's first connection when tracing) happens before the measured runs."""
    host, port = processes.base.removeprefix("http://").rsplit(":", 1)
    client = api_load.KeepAlivePool(host, int(port))
    try:
        status = await client.post("/v1/fetcher", api_load._body(f"warm-{processes.pid}"))
    finally:
        client.close()
    if status != 202:
        raise RuntimeError(f"warm-up request answered {status}")
    await asyncio.sleep(1.0)


def _api_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(key: str) -> float:
        return round(float(statistics.median(run[key] for run in runs)), 2)

    return {
        "median_requests_per_second": median("requests_per_second"),
        "median_p50_ms": median("p50_ms"),
        "median_p99_ms": median("p99_ms"),
        "median_fetcher_cpu_ms_per_request": median("fetcher_cpu_ms_per_request"),
        "errors": sum(run["errors"] for run in runs),
        "runs": runs,
    }


def api_part(found: dict[str, OtlpReceiver]) -> dict[str, Any]:
    """New-job load against one Manager + Worker per variant, alternating repetitions."""
    rate = api_load.RATES[0]
    print(
        f"API load, new jobs at {rate} req/s, {api_load.SECONDS:.0f} s per run, "
        f"{REPS} alternating repetitions:",
        flush=True,
    )
    database = create_postgres("load", api_load._SOURCE)
    try:
        with ExitStack() as stack:
            stacks: dict[str, tuple[FetcherProcesses, api_load.CpuMeter]] = {}
            for variant in VARIANTS:
                processes = stack.enter_context(
                    FetcherProcesses("worker", worker_nice=0, **variant_env(variant, found))
                )
                processes.connect_postgres("bench_pg", database)
                asyncio.run(_api_warm_up(processes))
                databases = {"source": database, "metadata": processes.metadata_database}
                stacks[variant] = (processes, api_load.CpuMeter(processes, databases))
            runs: dict[str, list[dict[str, Any]]] = {variant: [] for variant in VARIANTS}
            for rep in range(REPS):
                for variant in VARIANTS[rep % 3 :] + VARIANTS[: rep % 3]:
                    print(f"  {variant}:", flush=True)
                    runs[variant].append(asyncio.run(_api_run(variant, *stacks[variant], rate)))
    finally:
        drop_postgres(database)
    results = {variant: _api_summary(runs[variant]) for variant in VARIANTS}
    keys = (
        "median_requests_per_second",
        "median_p50_ms",
        "median_p99_ms",
        "median_fetcher_cpu_ms_per_request",
    )
    _table("API load", results, keys)
    return {"rate": rate, "seconds": api_load.SECONDS, "results": results,
            "ratios": _ratios(results, keys)}  # fmt: skip


def main() -> int:
    report: dict[str, Any] = {"started": datetime.now(UTC).isoformat(), "rows": ROWS, "reps": REPS}
    with receivers() as found:
        if "extraction" in PARTS:
            report["extraction"] = extraction_part(found)
        if "api" in PARTS:
            report["api"] = api_part(found)
        time.sleep(0.5)  # the processes flushed their batch processors when they stopped
        report["spans_received"] = {variant: r.span_count for variant, r in found.items()}
        report["export_requests"] = {variant: r.requests for variant, r in found.items()}
    print(f"spans received: {report['spans_received']}", flush=True)
    if report["spans_received"].get("on_unsampled"):
        print("  WARNING: the unsampled variant exported spans", flush=True)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"tracing-cost-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
