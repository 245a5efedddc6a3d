"""What tracing costs (issue 22, scope 5): off, on and sampled, on and unsampled, in one run.

Variants of the same processes, differing only in their trace settings (and, for the last one,
in their code):

* ``off``: ``TRACING_ENABLED`` unset (no SDK at all; the target is "within noise" of the code
  before tracing);
* ``on_sampled``: ``TRACING_ENABLED=true``, the default parent-based sampler and the SDK's
  batch span processor exporting over OTLP/HTTP to a receiver on loopback
  (:class:`tests.otlp_receiver.OtlpReceiver`, in this process: it parses and counts spans);
* ``on_unsampled``: ``TRACING_ENABLED=true`` with ``OTEL_TRACES_SAMPLER=always_off`` (the
  SDK runs, context propagates, nothing is recorded; its own receiver must count 0 spans);
* ``pre_tracing``, only when ``FETCHER_BENCH_PRE_TRACING_SRC`` names the ``src`` directory of an
  export of an older commit (``git archive da4f3b6 src | tar -x -C /tmp/x``, then
  ``/tmp/x/src``): ``off``'s settings, but its processes import that tree (``PYTHONPATH``).

Every variant's processes get ``PYTHONPATH`` set to the tree they must run (this checkout's
``src`` but for ``pre_tracing``), and the bench checks each started process: its own
interpreter, environment and working directory (``/proc/<pid>/exe``, ``environ``, ``cwd``)
must resolve ``fetcher`` inside that tree, and ``fetcher.settings_tracing`` must exist exactly
when the variant runs this checkout. Each process has a fresh scratch metadata store (its own
PostgreSQL database or SQLite file), which it migrates itself at start, so an older tree never
meets a newer schema.

Parts (``FETCHER_BENCH_TRACING_PARTS``, default ``extraction,api``):

* ``extraction``: the ledger of :mod:`bench.extraction` (``FETCHER_BENCH_ROWS`` rows, default
  500 000) extracted by one embedded process per variant, its job runner and alternating
  repetitions (``FETCHER_BENCH_REPS``, default 3): ``completedAt − createdAt`` and the
  process's CPU seconds;
* ``api``: the open-loop ``POST /v1/fetcher`` load of :mod:`bench.api_load`
  (``FETCHER_BENCH_LOAD_SECONDS`` per run) against one Manager + Worker per variant, the same
  repetitions alternated, for each kind of ``FETCHER_BENCH_LOAD_KINDS`` (default
  ``new,duplicate``):

  - ``duplicate`` at the first rate of ``FETCHER_BENCH_LOAD_RATES`` (default 50/s): the same
    body again (§3.8), answered 200 with the existing job: the Manager's whole request path
    (HTTP server span, validation, the deduplication lookup) and no Worker work at all, so the
    runs cannot leave a backlog;
  - ``new`` at ``FETCHER_BENCH_TRACING_NEW_RATE`` (default 10/s, a rate one Worker sustains
    here beside everything else, see bench/README.md): each request creates a job (live
    connection test, insert, outbox, publish: all traced), and the Worker runs it.

  Before every run the variant's queue is drained: no job ``pending`` or ``processing`` and no
  unsent outbox row (the Worker's events relay) in its metadata store, so every run starts
  empty; the backlog left at the end of a run and the time it took to drain are reported.
  Figures: achieved requests/s, p50/p99, errors, the Manager's and Worker's CPU milliseconds
  per request over the load, and for ``new`` the Worker's CPU per job from the start of the
  load to the end of its drain (the run's jobs, all of them finished).

Every variant's processes live for the whole part, so each repetition finds them warm. The
tables give each variant's median, its ratio to ``off`` from the same run and the per
repetition ratios (the machine is shared: absolute figures are noisy, same-run ratios less
so). JSON goes under ``bench/results/``. Needs PostgreSQL and, for ``api``, RabbitMQ and the
S3 server. Run: ``PYTHONPATH=src .venv/bin/python bench/tracing_cost.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
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
from bench.fetcher_processes import (
    FetcherProcesses,
    cpu_seconds,
    create_postgres,
    drop_postgres,
    postgres_scalar,
)

PARTS = set(os.environ.get("FETCHER_BENCH_TRACING_PARTS", "extraction,api").split(","))
NEW_RATE = int(os.environ.get("FETCHER_BENCH_TRACING_NEW_RATE", "10"))
PRE_TRACING_SRC = os.environ.get("FETCHER_BENCH_PRE_TRACING_SRC", "")
RESULTS = Path(__file__).resolve().parent / "results"
SRC = Path(__file__).resolve().parent.parent / "src"
TRACED = ("on_sampled", "on_unsampled")
VARIANTS = ("off", *TRACED) + (("pre_tracing",) if PRE_TRACING_SRC else ())
#: Longest wait for a variant's queue to empty before a run fails the bench.
DRAIN_LIMIT_SECONDS = 300.0


@contextmanager
def receivers() -> Iterator[dict[str, OtlpReceiver]]:
    """One loopback receiver per tracing variant (the unsampled one should stay empty)."""
    started: dict[str, OtlpReceiver] = {}
    try:
        for variant in TRACED:
            started[variant] = OtlpReceiver(keep=False)
        yield started
    finally:
        for receiver in started.values():
            receiver.close()


def variant_src(variant: str) -> Path:
    """The ``src`` tree the variant's processes import."""
    return Path(PRE_TRACING_SRC).resolve() if variant == "pre_tracing" else SRC


def variant_env(variant: str, found: dict[str, OtlpReceiver]) -> dict[str, str]:
    """The settings of ``variant``: its code tree; nothing more for ``off`` and
    ``pre_tracing``; the SDK's defaults otherwise (the batch processor's 5 s schedule
    included), the endpoint being the variant's receiver."""
    env = {"PYTHONPATH": str(variant_src(variant))}
    if variant not in TRACED:
        return env
    env |= {"TRACING_ENABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": found[variant].endpoint}
    if variant == "on_unsampled":
        env["OTEL_TRACES_SAMPLER"] = "always_off"
    return env


_PROBE = (
    "import importlib.util, json, fetcher; print(json.dumps({'fetcher': fetcher.__file__,"
    " 'settings_tracing': importlib.util.find_spec('fetcher.settings_tracing') is not None}))"
)


def running_code(pid: int) -> dict[str, Any]:
    """Which ``fetcher`` package process ``pid`` imported: its own interpreter, run with its
    own environment and working directory, resolves the package as the process did (``-P``:
    the process was started from a script whose directory, the venv's ``bin``, holds no
    package, so neither path entry may be the working directory)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode()
    env = dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)
    probe = subprocess.run(
        [os.readlink(f"/proc/{pid}/exe"), "-P", "-c", _PROBE],
        env=env,
        cwd=os.readlink(f"/proc/{pid}/cwd"),
        capture_output=True,
        text=True,
        check=True,
    )
    return {"pid": pid, "pythonpath": env.get("PYTHONPATH", ""), **json.loads(probe.stdout)}


def check_code(variant: str, processes: FetcherProcesses) -> dict[str, Any]:
    """Every process of ``processes`` runs ``variant``'s tree (else ``RuntimeError``); with
    the digest of the ``/openapi.json`` its server answers (the same for this checkout's
    variants; an older tree's API may differ)."""
    src = variant_src(variant)
    found = []
    for pid in (processes.manager_pid, processes.worker_pid):
        if not pid:
            continue
        code = running_code(pid)
        inside = Path(code["fetcher"]).resolve().is_relative_to(src)
        if not inside or code["settings_tracing"] != (variant != "pre_tracing"):
            raise RuntimeError(f"{variant}: process {pid} runs {code}, not {src}")
        found.append(code)
    with urllib.request.urlopen(f"{processes.base}/openapi.json", timeout=30) as answer:
        digest = hashlib.sha256(answer.read()).hexdigest()[:16]
    print(f"  {variant}: {[c['fetcher'] for c in found]}, /openapi.json {digest}", flush=True)
    return {"processes": found, "openapi_sha256_16": digest}


def _ratio(value: Any, base: Any) -> float | None:
    return round(value / base, 3) if value is not None and base else None


def _ratios(results: dict[str, dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    """Each variant's ``key`` median over ``off``'s (> 1: more time, CPU or requests/s); with
    ``pre_tracing``, also ``off``'s over ``pre_tracing``'s (> 1: ``off`` costs more)."""
    ratios: dict[str, Any] = {
        variant: {key: _ratio(results[variant].get(key), results["off"].get(key)) for key in keys}
        for variant in VARIANTS[1:]
    }
    if "pre_tracing" in results:
        ratios["off_over_pre_tracing"] = {
            key: _ratio(results["off"].get(key), results["pre_tracing"].get(key)) for key in keys
        }
    return ratios


def _paired(values: dict[str, list[float]]) -> dict[str, list[float | None]]:
    """Per repetition, each variant's value over ``off``'s of the same repetition (the
    repetitions are interleaved, so these pairs ran close together)."""
    return {
        variant: [_ratio(v, o) for v, o in zip(values[variant], values["off"], strict=True)]
        for variant in VARIANTS[1:]
    }


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
    code: dict[str, Any] = {}
    with ledger_source("postgres", ROWS) as register, ExitStack() as stack:
        contenders: dict[str, Callable[[], Run]] = {}
        for variant in VARIANTS:
            processes = stack.enter_context(
                FetcherProcesses("embedded", worker_nice=0, **variant_env(variant, found))
            )
            code[variant] = check_code(variant, processes)
            register(processes)
            _warm_up(processes, "bench_src")  # starts the embedded encoder process
            contenders[variant] = _fetcher_runner(
                processes, {"bench_src": {"ledger": mapped}}, None, ROWS
            )
        results = _summaries(_alternate(contenders), ROWS)
    keys = ("median_seconds", "median_cpu_seconds")
    _table("Extraction", results, keys)
    paired = {
        "seconds": _paired({v: results[v]["seconds"] for v in VARIANTS}),
        "cpu_seconds": _paired({v: results[v]["cpu_seconds"] for v in VARIANTS}),
    }
    print(f"  per repetition, over off: {paired}", flush=True)
    return {
        "rows": ROWS,
        "code": code,
        "results": results,
        "ratios": _ratios(results, keys),
        "paired_ratios": paired,
    }


class _Meter(api_load.CpuMeter):
    """:class:`bench.api_load.CpuMeter` that also keeps the Manager's and the Worker's CPU
    seconds at the start, so that a run's cost can be read again once its jobs are done."""

    def __init__(self, processes: FetcherProcesses, databases: dict[str, str]) -> None:
        super().__init__(processes, databases)
        self.pids = {"manager": processes.manager_pid, "worker": processes.worker_pid}
        self.at_start = dict.fromkeys(self.pids, 0.0)

    def start(self) -> None:
        super().start()
        self.at_start = {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def since_start(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) - self.at_start[name] for name, pid in self.pids.items()}


_BACKLOG = (
    "SELECT (SELECT count(*) FROM jobs WHERE status IN ('pending', 'processing'))"
    " + (SELECT count(*) FROM outbox WHERE sent_at IS NULL)"
)


def backlog(processes: FetcherProcesses) -> int:
    """Jobs not finished and job events not sent yet, in the variant's metadata store."""
    return int(postgres_scalar(processes.metadata_database, _BACKLOG) or 0)


def drain(processes: FetcherProcesses) -> float:
    """Waits until :func:`backlog` is 0; the seconds it took."""
    began = time.perf_counter()
    while backlog(processes):
        if time.perf_counter() - began > DRAIN_LIMIT_SECONDS:
            raise RuntimeError(f"backlog of {processes.base} not drained in {DRAIN_LIMIT_SECONDS}s")
        time.sleep(0.1)
    return round(time.perf_counter() - began, 2)


def _api_run(
    variant: str, processes: FetcherProcesses, meter: _Meter, kind: str, rate: int
) -> dict[str, Any]:
    """One open-loop run from an empty queue; then the drain of the jobs it created."""
    waited = drain(processes)
    host, port = processes.base.removeprefix("http://").rsplit(":", 1)

    async def load() -> dict[str, Any]:
        client = api_load.KeepAlivePool(host, int(port))
        try:
            return await api_load.fixed_rate(client, rate, kind, meter)
        finally:
            client.close()  # inside the loop: closing a connection schedules a callback

    figures = asyncio.run(load())
    left = backlog(processes)
    drained = drain(processes)
    through = meter.since_start()
    cpu = figures["cpu_ms_per_request"]
    count = figures["requests"]
    run = {
        "variant": variant,
        "requests_per_second": figures["achieved_per_second"],
        "manager_cpu_ms_per_request": cpu["manager"],
        "worker_cpu_ms_per_request": cpu["worker"],
        "fetcher_cpu_ms_per_request": round(cpu["manager"] + cpu["worker"], 2),
        # The run's requests and, for new jobs, their work to the end (drain included).
        "through_drain_cpu_ms_per_request": {
            name: round(seconds / count * 1000, 2) for name, seconds in through.items()
        },
        "backlog_before": waited,
        "backlog_at_end": left,
        "drain_seconds": drained,
        **figures,
    }
    print(
        f"    {variant}: {run['requests_per_second']} req/s, Manager {cpu['manager']} ms,"
        f" Worker {cpu['worker']} ms/request ({run['through_drain_cpu_ms_per_request']}"
        f" through the drain); backlog at end {left}, drained in {drained} s",
        flush=True,
    )
    return run


def _api_warm_up(processes: FetcherProcesses) -> None:
    """One job, not counted: each stack's first request (and the Worker's first job, and the
    exporter's first connection when tracing) happens before the measured runs."""
    host, port = processes.base.removeprefix("http://").rsplit(":", 1)

    async def post() -> int:
        client = api_load.KeepAlivePool(host, int(port))
        try:
            return await client.post("/v1/fetcher", api_load._body(f"warm-{processes.pid}"))
        finally:
            client.close()

    status = asyncio.run(post())
    if status != 202:
        raise RuntimeError(f"warm-up request answered {status}")
    drain(processes)


_API_KEYS = (
    "median_requests_per_second",
    "median_p50_ms",
    "median_p99_ms",
    "median_manager_cpu_ms_per_request",
    "median_worker_cpu_ms_per_request",
)


def _api_summary(kind: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(values: list[float]) -> float:
        return round(float(statistics.median(values)), 2)

    def each(key: str) -> list[float]:
        return [run[key] for run in runs]

    # Per new job: the Worker's CPU from the start of the load to the end of the drain (every
    # job of the run finished). A duplicate makes no job: its figure is the Worker's idle CPU
    # over the load, per request.
    worker = [
        run["through_drain_cpu_ms_per_request"]["worker"]
        if kind == "new"
        else run["worker_cpu_ms_per_request"]
        for run in runs
    ]
    return {
        "median_requests_per_second": median(each("requests_per_second")),
        "median_p50_ms": median(each("p50_ms")),
        "median_p99_ms": median(each("p99_ms")),
        "median_manager_cpu_ms_per_request": median(each("manager_cpu_ms_per_request")),
        "median_worker_cpu_ms_per_request": median(worker),
        "errors": sum(each("errors")),
        "requests": sum(each("requests")),
        "max_backlog_at_end": max(each("backlog_at_end")),
        "max_drain_seconds": max(each("drain_seconds")),
        "p50_ms": each("p50_ms"),
        "p99_ms": each("p99_ms"),
        "manager_cpu_ms_per_request": each("manager_cpu_ms_per_request"),
        "worker_cpu_ms": worker,
        "runs": runs,
    }


def api_part(found: dict[str, OtlpReceiver]) -> dict[str, Any]:
    """Duplicate and new-job loads against one Manager + Worker per variant, alternating
    repetitions, every run from an empty queue."""
    rates = {"duplicate": api_load.RATES[0], "new": NEW_RATE}
    kinds = [kind for kind in api_load.KINDS if kind in rates]
    print(
        f"API load, {', '.join(f'{k} at {rates[k]} req/s' for k in kinds)},"
        f" {api_load.SECONDS:.0f} s per run, {REPS} alternating repetitions:",
        flush=True,
    )
    database = create_postgres("load", api_load._SOURCE)
    code: dict[str, Any] = {}
    try:
        with ExitStack() as stack:
            stacks: dict[str, tuple[FetcherProcesses, _Meter]] = {}
            for variant in VARIANTS:
                processes = stack.enter_context(
                    FetcherProcesses("worker", worker_nice=0, **variant_env(variant, found))
                )
                code[variant] = check_code(variant, processes)
                processes.connect_postgres("bench_pg", database)
                _api_warm_up(processes)
                databases = {"source": database, "metadata": processes.metadata_database}
                stacks[variant] = (processes, _Meter(processes, databases))
            runs: dict[str, dict[str, list[dict[str, Any]]]] = {
                kind: {variant: [] for variant in VARIANTS} for kind in kinds
            }
            for rep in range(REPS):
                turn = rep % len(VARIANTS)
                for kind in kinds:
                    for variant in VARIANTS[turn:] + VARIANTS[:turn]:
                        print(f"  {variant}:", flush=True)
                        runs[kind][variant].append(
                            _api_run(variant, *stacks[variant], kind, rates[kind])
                        )
    finally:
        drop_postgres(database)
    report: dict[str, Any] = {"seconds": api_load.SECONDS, "rates": rates, "code": code}
    for kind in kinds:
        results = {variant: _api_summary(kind, runs[kind][variant]) for variant in VARIANTS}
        _table(f"API load, {kind} at {rates[kind]} req/s", results, _API_KEYS)
        paired = {
            key: _paired({v: results[v][key] for v in VARIANTS})
            for key in ("p50_ms", "p99_ms", "manager_cpu_ms_per_request", "worker_cpu_ms")
        }
        print(f"  per repetition, over off: {paired}", flush=True)
        errors = {v: results[v]["errors"] for v in VARIANTS}
        print(f"  errors {errors}", flush=True)
        report[kind] = {
            "rate": rates[kind],
            "results": results,
            "ratios": _ratios(results, _API_KEYS),
            "paired_ratios": paired,
        }
    return report


def _uptime() -> str:
    """The time and what ``uptime`` reports as load average (``/proc/loadavg``)."""
    one, five, fifteen = os.getloadavg()
    now = datetime.now(UTC).strftime("%H:%M:%S UTC")
    return f"{now} load average: {one:.2f}, {five:.2f}, {fifteen:.2f}"


def main() -> int:
    report: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(),
        "uptime_at_start": _uptime(),
        "rows": ROWS,
        "reps": REPS,
        "variants": list(VARIANTS),
        "pre_tracing_src": PRE_TRACING_SRC or None,
    }
    print(f"{report['uptime_at_start']}; variants {list(VARIANTS)}", flush=True)
    with receivers() as found:
        if "extraction" in PARTS:
            report["extraction"] = extraction_part(found)
        if "api" in PARTS:
            report["api"] = api_part(found)
        time.sleep(0.5)  # the processes flushed their batch processors when they stopped
        report["spans_received"] = {variant: r.span_count for variant, r in found.items()}
        report["export_requests"] = {variant: r.requests for variant, r in found.items()}
    report["uptime_at_end"] = _uptime()
    print(f"spans received: {report['spans_received']}", flush=True)
    if report["spans_received"].get("on_unsampled"):
        print("  WARNING: the unsampled variant exported spans", flush=True)
    print(report["uptime_at_end"], flush=True)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"tracing-cost-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
