"""Side-by-side extraction benchmark (issue 12): Fetcher against the floor and the best peer.

One invocation creates ``ledger(id uuid, email text, amount numeric(18,2), created_at
timestamptz, status text, metadata jsonb)`` with ``FETCHER_BENCH_ROWS`` rows (default 500 000)
in a scratch PostgreSQL database, then runs, in alternating repetitions
(``FETCHER_BENCH_REPS``, default 3):

* ``copy``: the floor, ``psql -c "COPY (SELECT <cols> FROM ledger) TO STDOUT" > /dev/null``;
* ``connectorx``: ConnectorX → Arrow → Polars ``write_json`` of the same columns to
  ``/dev/null``, in a subprocess (the ``bench`` extra; its own peak RSS from ``ru_maxrss``);
* ``worker``: Fetcher end to end through running Manager and Worker processes (engine,
  document, HMAC, AES-GCM, base64, upload to the SeaweedFS S3 server on 127.0.0.1:8333);
* ``worker_local``: the same Worker storing in a local directory
  (``OBJECT_STORAGE_LOCAL_WORKER``): the Worker's own cost, with no S3 server;
* ``embedded``: the same through one embedded process and its local store.

Fetcher's time is the job's own ``completedAt − createdAt`` (submission to completion, server
clocks, polled every 0.1 s); peak RSS is the extracting process's ``VmHWM``, reset through
``/proc/<pid>/clear_refs`` before each job. Every run also reports, over the same span
(``bench.support.sampling``): the extracting process's CPU seconds (Fetcher's with its children,
``psql``'s or the ``mariadb`` client's for a floor, ConnectorX's own), the source server's (the
postmaster's whole tree with its reaped backends, or ``mariadbd``), for PostgreSQL the share of
the backends serving the ledger's database, the S3 server's (SeaweedFS), the Manager's (Worker
runs) and the whole machine's busy CPU (what else ran). ``FETCHER_BENCH_SIZES`` (default
1 500 000) adds fresh ledgers of those sizes against embedded mode and the local-store Worker
(part ``sizes``). The PostgreSQL part also stores the object's size alone, through the S3 store
(``s3_upload_only``: the S3 server's CPU) and through the local store (``local_write_only``: the
writing process's CPU). A summary per part and size is printed and stored (``summary``): median
wall time, speed against the floor and ConnectorX, Fetcher's CPU (and per 500 k rows), the
source and S3 servers' CPU, peak RSS. Then: a filtered extraction (``between`` on
``created_at``, about 10 % of rows) against its COPY floor; memory scaling (peak Worker RSS at
``FETCHER_BENCH_SCALING`` rows, default 100 000, 500 000 and 1 500 000, with the narrow columns
``amount, id, status`` so that 1.5 M rows stay under the 256 MiB result ceiling); and MariaDB
(``mariadb --batch --quick -e 'SELECT …' > /dev/null`` against Fetcher's MySQL connector on the
same table, through the Worker and embedded); and wide rows (peak Worker RSS for a 150 MB
document of rows ``FETCHER_BENCH_WIDE`` characters wide, default 1 500, 15 000, 150 000 and
500 000: fetches are sized by bytes, ``fetcher.adapters.batch_sizing``).
``FETCHER_BENCH_PARTS`` picks parts (default ``postgres,sizes,filtered,scaling,mariadb,wide``).
The Worker's objects (and the upload-only measurement's) are deleted from the test bucket at
the end.

Ratios are speeds, floor time / Fetcher time (≥ 0.25 is the issue's target for COPY, ≥ 0.75 for
ConnectorX), always from the same run: the machine is shared and absolute figures are noisy.
Everything is written as JSON under ``bench/results/``. Needs PostgreSQL, MariaDB, RabbitMQ and
the S3 server (``scripts/s3-server.sh start``). Run: ``.venv/bin/python -m bench.extraction``.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bench.support import (
    COLUMNS,
    MARIADB_LEDGER,
    NARROW,
    PG_LEDGER,
    S3_ACCESS_KEY,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET_KEY,
    STEP_SECONDS,
    CpuMeter,
    FetcherProcesses,
    JobFigure,
    SessionCpu,
    bench_prefix,
    create_mariadb,
    create_postgres,
    delete_s3_prefix,
    drop_mariadb,
    drop_postgres,
    machine_busy_seconds,
    mariadb_server_pid,
    postgres_scalar,
    postmaster_pid,
    s3_server_pid,
    tree_cpu_seconds,
    vm_hwm_mib,
    write_report,
)


@dataclass
class Run:
    """One run of a contender."""

    seconds: float
    #: Result bytes (0 when not counted: ConnectorX).
    size: int
    #: Peak RSS MiB of the extracting process (Fetcher, ConnectorX).
    peak_rss_mib: float | None = None
    #: CPU seconds of the extracting process: Fetcher's tree, ConnectorX's, a floor's client.
    cpu_seconds: float | None = None
    #: CPU seconds of the processes around it over the same span (:func:`_meter`):
    #: ``source_server``, ``source_sessions``, ``s3_server``, ``manager``, ``machine``.
    meters: dict[str, float] = field(default_factory=dict)


ROWS = int(os.environ.get("FETCHER_BENCH_ROWS", "500000"))
REPS = int(os.environ.get("FETCHER_BENCH_REPS", "3"))
SCALING = [
    int(n) for n in os.environ.get("FETCHER_BENCH_SCALING", "100000,500000,1500000").split(",") if n
]
WIDE = [
    int(n) for n in os.environ.get("FETCHER_BENCH_WIDE", "1500,15000,150000,500000").split(",") if n
]
#: Characters of ``body`` in every wide-rows table: a document of about 150 MB.
WIDE_BYTES = 150_000_000
#: Ledger sizes of the ``sizes`` part (embedded and the local-store Worker against the floors).
SIZES = [int(n) for n in os.environ.get("FETCHER_BENCH_SIZES", "1500000").split(",") if n]
PARTS = set(
    os.environ.get("FETCHER_BENCH_PARTS", "postgres,sizes,filtered,scaling,mariadb,wide").split(",")
)
#: Rows the CPU figures are scaled to (``cpu_s_per_500k_rows``: the issue's target is per
#: 500 k ledger rows).
CPU_ROWS = 500_000
#: The ``sizes`` part's columns: 1.5 M rows of all six make a 630 MB document, past the 256 MiB
#: result ceiling (§3.5), which ``ENGINE_MAX_RESULT_BYTES`` can only lower; these four make
#: about 250 MiB.
SIZE_COLUMNS = ("amount", "created_at", "id", "status")

_CONNECTORX = r"""
import json, os, resource, sys, time
import connectorx, polars
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
begin, cpu_begin = time.perf_counter(), cpu()
table = connectorx.read_sql(sys.argv[1], sys.argv[2], return_type="arrow")
frame = polars.from_arrow(table)
with open(os.devnull, "wb") as sink:
    frame.write_json(sink)
seconds, cpu_seconds = time.perf_counter() - begin, cpu() - cpu_begin
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "rows": frame.height,
                  "peak_rss_mib": peak / 1024}))
"""


def _select(columns: tuple[str, ...], where: str = "") -> str:
    return f"SELECT {', '.join(columns)} FROM ledger{where}"


def _timed(command: list[str]) -> float:
    """Wall time of one command whose output goes to ``/dev/null``."""
    began = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - began


def _children_cpu() -> float:
    """User + system CPU seconds of this process's reaped children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _floor_runner(command: list[str], size: int, meter: CpuMeter) -> Callable[[], Run]:
    """A floor (``psql … COPY``, ``mariadb --batch``): its wall time, its client's CPU and the
    meter's figures (the server's CPU of the query)."""

    def run() -> Run:
        client = _children_cpu()
        meter.start()
        seconds = _timed(command)
        meters = meter.stop()
        return Run(seconds, size, None, _children_cpu() - client, meters)

    return run


def _output_bytes(command: list[str]) -> int:
    """Bytes a command writes to stdout (counted in chunks, never held)."""
    with subprocess.Popen(command, stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        total = 0
        while chunk := process.stdout.read(1 << 20):
            total += len(chunk)
    return total


def _psql(database: str, sql: str) -> list[str]:
    return ["psql", "-X", "-q", "-h", "127.0.0.1", "-U", "postgres", "-d", database, "-c", sql]


def _copy(database: str, select: str) -> list[str]:
    return _psql(database, f"COPY ({select}) TO STDOUT")


def _warm_up(processes: FetcherProcesses, name: str) -> None:
    """One small job, not counted: a process's first PostgreSQL stream starts its batch
    encoder process (embedded mode), which the measured jobs should find running."""
    first_hour = {"created_at": {"between": ["2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"]}}
    processes.job({name: {"ledger": ["id"]}}, {name: {"ledger": first_hour}})
    time.sleep(1.0)


def _s3_server_pid() -> int | None:
    """The SeaweedFS process ``scripts/s3-server.sh`` started for the bench's S3 port."""
    return s3_server_pid(S3_ENDPOINT.rsplit(":", 1)[-1])


def _meter(source: str, database: str, processes: FetcherProcesses | None = None) -> CpuMeter:
    """CPU seconds around a run: ``source_server`` (the PostgreSQL postmaster's tree with its
    reaped backends: every database of the cluster, the Manager's metadata store included; or
    the MariaDB server), ``source_sessions`` (PostgreSQL only: the backends of ``database``,
    the run's own share), ``s3_server`` (SeaweedFS, whatever stores in it meanwhile),
    ``manager`` (a Worker run's Manager) and ``machine`` (every core's busy time). The shared
    servers also serve other users of the machine: ``machine`` minus the known figures says
    how much else ran."""
    server = postmaster_pid() if source == "postgres" else mariadb_server_pid()
    s3 = _s3_server_pid()
    probes: dict[str, Callable[[], float] | None] = {
        "source_server": None if server is None else lambda: tree_cpu_seconds(server),
        "s3_server": None if s3 is None else lambda: tree_cpu_seconds(s3),
        "machine": machine_busy_seconds,
    }
    if processes is not None and processes.worker_pid:
        manager = processes.manager_pid
        probes["manager"] = lambda: tree_cpu_seconds(manager)
    sessions = {}
    if source == "postgres" and server is not None:
        sessions["source_sessions"] = SessionCpu(server, database)
    return CpuMeter(probes, sessions)


def _s3_upload_figures(size: int) -> tuple[float, float | None]:
    """Wall time and the S3 server's own CPU seconds (``None`` when its PID is unknown) of
    storing ``size`` bytes (random base64, as the stored object is) in the SeaweedFS bucket
    through the Worker's own S3 store: the storage part of the Worker's time, with no
    extraction, HMAC or encryption. The server's CPU shares the same two cores as the Worker,
    so it bounds what the Worker's own time can be."""
    server = _s3_server_pid()
    before = tree_cpu_seconds(server) if server else None
    seconds = _s3_upload_seconds(size)
    return seconds, None if server is None or before is None else tree_cpu_seconds(server) - before


def _s3_upload_seconds(size: int) -> float:
    """Wall time of storing ``size`` bytes through the Worker's S3 store (see above)."""
    from fetcher.adapters.objectstore.s3 import S3ObjectStore

    async def run() -> float:
        store = S3ObjectStore(
            endpoint=S3_ENDPOINT,
            bucket=S3_BUCKET,
            region="us-east-1",
            access_key_id=S3_ACCESS_KEY,
            secret_key=S3_SECRET_KEY,
            path_style=True,
        )
        chunk = base64.b64encode(os.urandom(3 << 20))  # 4 MiB
        async with store:
            began = time.perf_counter()
            async with store.open_writer(f"{prefix}/upload") as writer:
                for offset in range(0, size, len(chunk)):
                    await writer.write(chunk[: size - offset])
            return time.perf_counter() - began

    prefix = bench_prefix(f"upload-{os.getpid()}")
    try:
        return asyncio.run(run())
    finally:
        delete_s3_prefix(prefix)


def _local_write_figures(size: int) -> tuple[float, float]:
    """Wall time and CPU seconds (this process's, idle otherwise) of storing ``size`` bytes
    (random base64 in 1 MiB writes, as the Worker writes them) through the local store the
    local-store Worker uses, in a fresh directory on the same file system: the store's share
    of that Worker's time and CPU, with no extraction, HMAC or encryption."""
    from fetcher.adapters.objectstore.local import LocalObjectStore

    chunk = base64.b64encode(os.urandom(3 << 18))  # 1 MiB

    async def run() -> None:
        async with LocalObjectStore(directory).open_writer("bench/local-write") as writer:
            for offset in range(0, size, len(chunk)):
                await writer.write(chunk[: size - offset])

    with tempfile.TemporaryDirectory(prefix="fetcher-bench-local-") as directory:
        began, cpu_began = time.perf_counter(), time.process_time()
        asyncio.run(run())
        return time.perf_counter() - began, time.process_time() - cpu_began


def _connectorx(database: str, select: str) -> dict[str, Any]:
    url = f"postgresql://postgres@127.0.0.1:5432/{database}"
    done = subprocess.run(
        [sys.executable, "-c", _CONNECTORX, url, select],
        capture_output=True,
        text=True,
        check=True,
    )
    figure: dict[str, Any] = json.loads(done.stdout)
    return figure


def _connectorx_runner(database: str, select: str, meter: CpuMeter) -> Callable[[], Run]:
    """ConnectorX → Polars in a subprocess: its own wall time and CPU (after its imports), and
    the meter's figures over the whole subprocess (its imports included: the servers idle)."""

    def run() -> Run:
        meter.start()
        figure = _connectorx(database, select)
        meters = meter.stop()
        return Run(figure["seconds"], 0, figure["peak_rss_mib"], figure["cpu_seconds"], meters)

    return run


#: What the printed figures call the meters.
_METER_LABELS = {"source_server": "source", "s3_server": "S3", "other": "other"}


def _summary(
    name: str,
    seconds: list[float],
    rows: int,
    size: int,
    rss: list[float],
    *,
    cpu: Sequence[float] = (),
    meters: dict[str, list[float]] | None = None,
) -> dict[str, Any]:
    """Median figures; ``cpu`` is the extracting process's CPU seconds (user + system) per
    job, steadier than wall time on a shared machine (for ``s3_upload_only``: the S3
    server's); ``meters`` the CPU seconds of the processes around it per job (:func:`_meter`),
    each kept as ``<name>_cpu_seconds`` and ``median_<name>_cpu_seconds``."""
    median = statistics.median(seconds)
    summary: dict[str, Any] = {
        "name": name,
        "seconds": [round(s, 3) for s in seconds],
        "median_seconds": round(median, 3),
        "rows_per_second": round(rows / median),
        "mb_per_second": round(size / median / 1e6, 1) if size else None,
        "bytes": size or None,
        "peak_rss_mib": round(max(rss), 1) if rss else None,
        "cpu_seconds": [round(c, 2) for c in cpu] or None,
        "median_cpu_seconds": round(statistics.median(cpu), 2) if cpu else None,
    }
    for key, values in (meters or {}).items():
        summary[f"{key}_cpu_seconds"] = [round(v, 2) for v in values]
        summary[f"median_{key}_cpu_seconds"] = round(statistics.median(values), 2)
    rss_text = f", peak RSS {summary['peak_rss_mib']} MiB" if rss else ""
    if cpu:
        rss_text += f", CPU {summary['median_cpu_seconds']} s {summary['cpu_seconds']}"
    for key, label in _METER_LABELS.items():
        if f"median_{key}_cpu_seconds" in summary:
            rss_text += f", {label} {summary[f'median_{key}_cpu_seconds']} s"
    mb_text = f", {summary['mb_per_second']} MB/s" if size else ""
    print(
        f"  {name:<22} median {median:7.2f}s  {rows / median:>10,.0f} rows/s{mb_text}{rss_text}"
        f"  (runs {summary['seconds']})",
        flush=True,
    )
    return summary


def _ratios(
    results: dict[str, dict[str, Any]], fetchers: list[str], floors: list[str]
) -> dict[str, float]:
    ratios = {}
    for fetcher in fetchers:
        for floor in floors:
            if fetcher in results and floor in results:
                ratio = results[floor]["median_seconds"] / results[fetcher]["median_seconds"]
                ratios[f"{fetcher}/{floor}"] = round(ratio, 3)
                print(f"  speed {fetcher}/{floor}: {ratio:.2f}x", flush=True)
    return ratios


def _alternate(contenders: dict[str, Callable[[], Run]]) -> dict[str, list[Run]]:
    """Each contender once per repetition, in a rotated order."""
    runs: dict[str, list[Run]] = {name: [] for name in contenders}
    names = list(contenders)
    for rep in range(REPS):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            runs[name].append(contenders[name]())
    return runs


def _other(run: Run) -> float | None:
    """The machine's busy CPU during ``run`` that no measured process used: other users of the
    machine, this script, the kernel's work for them; ``None`` without a machine figure."""
    if "machine" not in run.meters:
        return None
    known = ("source_server", "s3_server", "manager")
    return (
        run.meters["machine"]
        - (run.cpu_seconds or 0.0)
        - sum(run.meters.get(k, 0.0) for k in known)
    )


def _summaries(runs: dict[str, list[Run]], rows: int) -> dict[str, dict[str, Any]]:
    results = {}
    for name, figures in runs.items():
        seconds = [f.seconds for f in figures]
        size = max(f.size for f in figures)
        rss = [f.peak_rss_mib for f in figures if f.peak_rss_mib is not None]
        cpu = [f.cpu_seconds for f in figures if f.cpu_seconds is not None]
        keys = sorted({key for f in figures for key in f.meters})
        meters = {key: [f.meters[key] for f in figures if key in f.meters] for key in keys}
        other = [value for f in figures if (value := _other(f)) is not None]
        if other:
            meters["other"] = other
        results[name] = _summary(name, seconds, rows, size, rss, cpu=cpu, meters=meters)
    return results


def _fetcher_runner(
    processes: FetcherProcesses,
    mapped: dict[str, Any],
    filters: dict[str, Any] | None,
    rows: int,
    meter: CpuMeter | None = None,
) -> Callable[[], Run]:
    def run() -> Run:
        figure: JobFigure = processes.job(mapped, filters, meter)
        if figure.status != "completed" or figure.rows not in (None, rows):
            raise RuntimeError(f"{processes.mode} job ended {figure.status}: {figure.error}")
        return Run(
            figure.seconds, figure.size, figure.peak_rss_mib, figure.cpu_seconds, figure.meters
        )

    return run


def _table(part: str, rows: int, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The part's summary: one line per contender, printed and returned (stored in the JSON).
    ``cpu_s`` is the extracting process's CPU (Fetcher's with its children; a floor's client;
    ConnectorX's own); ``s3_upload_only``'s CPU is the S3 server's, in ``s3_server_cpu_s``."""
    floor = next((results[f] for f in ("copy", "mariadb_cli") if f in results), None)
    peer = results.get("connectorx_polars")
    lines = []
    for name, result in results.items():
        median = result["median_seconds"]
        cpu = result.get("median_cpu_seconds")
        s3 = result.get("median_s3_server_cpu_seconds")
        if name == "s3_upload_only":
            cpu, s3 = None, result.get("median_cpu_seconds")
        lines.append(
            {
                "part": part,
                "rows": rows,
                "contender": name,
                "median_s": median,
                "vs_floor": round(floor["median_seconds"] / median, 3) if floor else None,
                "vs_connectorx": round(peer["median_seconds"] / median, 3) if peer else None,
                "cpu_s": cpu,
                "cpu_s_per_500k_rows": None if cpu is None else round(cpu * CPU_ROWS / rows, 2),
                "source_server_cpu_s": result.get("median_source_server_cpu_seconds"),
                "source_sessions_cpu_s": result.get("median_source_sessions_cpu_seconds"),
                "s3_server_cpu_s": s3,
                "manager_cpu_s": result.get("median_manager_cpu_seconds"),
                "other_cpu_s": result.get("median_other_cpu_seconds"),
                "peak_rss_mib": result.get("peak_rss_mib"),
            }
        )
    _print_table(part, rows, lines)
    return lines


def _print_table(part: str, rows: int, lines: list[dict[str, Any]]) -> None:
    def cell(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    print(
        f"  summary, {part}, {rows:,} rows (medians; CPU in seconds; source = the whole "
        "server (its sessions of this database); other = the rest of the machine):",
        flush=True,
    )
    print(
        f"    {'contender':<22} {'wall s':>7} {'x floor':>7} {'x CX':>6} {'CPU':>6} "
        f"{'CPU/500k':>8} {'source (sessions)':>17} {'S3':>6} {'manager':>7} {'other':>6} "
        f"{'RSS MiB':>7}",
        flush=True,
    )
    for line in lines:
        source = cell(line["source_server_cpu_s"], ".2f")
        if line["source_sessions_cpu_s"] is not None:
            source += f" ({line['source_sessions_cpu_s']:.2f})"
        print(
            f"    {line['contender']:<22} {line['median_s']:>7.2f} "
            f"{cell(line['vs_floor'], '.2f'):>7} {cell(line['vs_connectorx'], '.2f'):>6} "
            f"{cell(line['cpu_s'], '.2f'):>6} {cell(line['cpu_s_per_500k_rows'], '.2f'):>8} "
            f"{source:>17} {cell(line['s3_server_cpu_s'], '.2f'):>6} "
            f"{cell(line['manager_cpu_s'], '.2f'):>7} {cell(line['other_cpu_s'], '.2f'):>6} "
            f"{cell(line['peak_rss_mib'], '.1f'):>7}",
            flush=True,
        )


def _ledger_contenders(
    database: str,
    mapped: dict[str, Any],
    fetchers: dict[str, FetcherProcesses],
    rows: int,
    columns: tuple[str, ...] = COLUMNS,
) -> dict[str, Callable[[], Run]]:
    """The COPY floor, ConnectorX (when installed) and each of ``fetchers`` (by contender
    name, each with the connection ``mapped`` names) on a PostgreSQL ledger of ``rows`` rows,
    all reading ``columns``."""
    select = _select(columns)
    copy_bytes = _output_bytes(_copy(database, select))
    contenders: dict[str, Callable[[], Run]] = {
        "copy": _floor_runner(_copy(database, select), copy_bytes, _meter("postgres", database)),
    }
    if importlib.util.find_spec("connectorx") and importlib.util.find_spec("polars"):
        contenders["connectorx_polars"] = _connectorx_runner(
            database, select, _meter("postgres", database)
        )
    else:
        print("  (connectorx/polars missing: pip install -e '.[bench]'; skipped)", flush=True)
    for name, processes in fetchers.items():
        meter = _meter("postgres", database, processes)
        contenders[name] = _fetcher_runner(processes, mapped, None, rows, meter)
    return contenders


def postgres_part(
    worker: FetcherProcesses,
    worker_local: FetcherProcesses,
    embedded: FetcherProcesses,
    database: str,
) -> dict[str, Any]:
    print(f"PostgreSQL ledger, {ROWS:,} rows, {REPS} alternating repetitions:", flush=True)
    fetchers = {
        "fetcher_worker_s3": worker,
        "fetcher_worker_local": worker_local,
        "fetcher_embedded": embedded,
    }
    mapped = {"bench_pg": {"ledger": list(COLUMNS)}}
    results = _summaries(_alternate(_ledger_contenders(database, mapped, fetchers, ROWS)), ROWS)
    stored = 4 * -(-(results["fetcher_worker_s3"]["bytes"] + 28) // 3)  # base64(nonce‖ct‖tag)
    for name, store in (
        ("s3_upload_only", _s3_upload_figures),
        ("local_write_only", _local_write_figures),
    ):
        figures = [store(stored) for _ in range(REPS)]
        results[name] = _summary(
            name,
            [seconds for seconds, _ in figures],
            ROWS,
            stored,
            [],
            cpu=[cpu for _, cpu in figures if cpu is not None],
        )
    ratios = _ratios(results, list(fetchers), ["copy", "connectorx_polars", "s3_upload_only"])
    return {
        "rows": ROWS,
        "results": results,
        "ratios": ratios,
        "summary": _table("postgres", ROWS, results),
    }


def sizes_part(worker_local: FetcherProcesses, embedded: FetcherProcesses) -> dict[str, Any]:
    """The issue's speed targets at each of ``FETCHER_BENCH_SIZES``: a fresh ledger of that
    size (dropped after) against embedded mode and the local-store Worker, no S3 server."""
    report: dict[str, Any] = {}
    fetchers = {"fetcher_worker_local": worker_local, "fetcher_embedded": embedded}
    for rows in SIZES:
        print(f"PostgreSQL ledger, {rows:,} rows, {REPS} alternating repetitions:", flush=True)
        database = create_postgres(f"ledger{rows}", PG_LEDGER.format(rows=rows))
        name = f"bench_pg_{rows}"
        try:
            for processes in fetchers.values():
                processes.connect_postgres(name, database)
            mapped = {name: {"ledger": list(SIZE_COLUMNS)}}
            contenders = _ledger_contenders(database, mapped, fetchers, rows, SIZE_COLUMNS)
            results = _summaries(_alternate(contenders), rows)
            report[str(rows)] = {
                "rows": rows,
                "results": results,
                "ratios": _ratios(results, list(fetchers), ["copy", "connectorx_polars"]),
                "summary": _table("sizes", rows, results),
            }
            for processes in fetchers.values():
                processes.delete_connection(name)
        finally:
            drop_postgres(database)
    return report


def filtered_part(worker: FetcherProcesses, database: str) -> dict[str, Any]:
    """``between`` on ``created_at`` over the first tenth of the rows' span."""
    span = ROWS * STEP_SECONDS // 10
    low = "2026-01-01T00:00:00Z"
    high = datetime.fromtimestamp(datetime.fromisoformat(low).timestamp() + span, tz=UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    where = f" WHERE created_at >= '{low}' AND created_at <= '{high}'"
    select = _select(COLUMNS, where)
    rows = int(postgres_scalar(database, f"SELECT count(*) FROM ledger{where}"))
    print(f"Filtered (between on created_at): {rows:,} rows of {ROWS:,}:", flush=True)
    copy_bytes = _output_bytes(_copy(database, select))
    mapped = {"bench_pg": {"ledger": list(COLUMNS)}}
    filters = {"bench_pg": {"ledger": {"created_at": {"between": [low, high]}}}}
    meter = _meter("postgres", database, worker)
    runs = _alternate(
        {
            "copy": _floor_runner(
                _copy(database, select), copy_bytes, _meter("postgres", database)
            ),
            "fetcher_worker_s3": _fetcher_runner(worker, mapped, filters, rows, meter),
        }
    )
    results = _summaries(runs, rows)
    return {
        "rows": rows,
        "results": results,
        "ratios": _ratios(results, ["fetcher_worker_s3"], ["copy"]),
        "summary": _table("filtered", rows, results),
    }


def _fresh_table_job(
    worker: FetcherProcesses, prefix: str, sql: str, table: str, columns: list[str]
) -> JobFigure:
    """One job on ``table`` of a scratch database made by ``sql`` (dropped after); it must
    complete."""
    database = create_postgres(prefix, sql)
    try:
        worker.connect_postgres("bench_fresh", database)
        figure = worker.job({"bench_fresh": {table: columns}}, None)
        worker.delete_connection("bench_fresh")
    finally:
        drop_postgres(database)
    if figure.status != "completed":
        raise RuntimeError(f"{prefix} job ended {figure.status}: {figure.error}")
    return figure


def scaling_part(worker: FetcherProcesses) -> dict[str, Any]:
    """Peak Worker RSS per size: one job per size on a fresh table, narrow columns."""
    idle = vm_hwm_mib(worker.pid)
    print(
        f"Memory scaling (columns {', '.join(NARROW)}), one fresh Worker "
        f"(peak RSS before any job: {idle:.1f} MiB):",
        flush=True,
    )
    figures = []
    for rows in SCALING:
        ledger = PG_LEDGER.format(rows=rows)
        figure = _fresh_table_job(worker, f"scale{rows}", ledger, "ledger", list(NARROW))
        figures.append(
            {
                "rows": rows,
                "peak_rss_mib": figure.peak_rss_mib,
                "seconds": figure.seconds,
                "bytes": figure.size,
            }
        )
        print(
            f"  {rows:>9,} rows: peak Worker RSS {figure.peak_rss_mib:.1f} MiB, "
            f"{figure.seconds:.2f}s, {figure.size / 2**20:.1f} MiB document",
            flush=True,
        )
    growth = figures[-1]["peak_rss_mib"] - figures[0]["peak_rss_mib"] if figures else 0.0
    print(f"  growth {SCALING[0]:,} → {SCALING[-1]:,} rows: {growth:+.1f} MiB", flush=True)
    return {
        "columns": NARROW,
        "idle_peak_rss_mib": round(idle, 1),
        "sizes": figures,
        "growth_mib": round(growth, 1),
    }


def wide_part(worker: FetcherProcesses) -> dict[str, Any]:
    """Peak Worker RSS per row width: one job per width, each a document of about 150 MB."""
    print(f"Wide rows, {WIDE_BYTES / 1e6:.0f} MB of text per table, one fresh Worker:", flush=True)
    figures = []
    for width in WIDE:
        rows = WIDE_BYTES // width
        sql = (
            f"CREATE TABLE wide (id integer, body text); INSERT INTO wide SELECT g, "
            f"repeat(md5(g::text), {width // 32}) FROM generate_series(1, {rows}) AS g;"
        )
        figure = _fresh_table_job(worker, f"wide{width}", sql, "wide", ["id", "body"])
        figures.append(
            {"width": width, "rows": rows, "peak_rss_mib": figure.peak_rss_mib,
             "seconds": figure.seconds, "bytes": figure.size}
        )  # fmt: skip
        print(
            f"  {rows:>7,} rows of {width:>7,} characters: peak Worker RSS "
            f"{figure.peak_rss_mib:.1f} MiB, {figure.seconds:.2f}s",
            flush=True,
        )
    return {"document_bytes": WIDE_BYTES, "widths": figures}


def mariadb_part(
    worker: FetcherProcesses, worker_local: FetcherProcesses, embedded: FetcherProcesses
) -> dict[str, Any]:
    """The MySQL connector against ``mariadb --batch --quick``: through the Worker to S3, the
    Worker to a local store, and embedded to the local store (no S3 upload: the connector's
    and the document's own cost); the MariaDB server's CPU beside each."""
    database, reader, password = create_mariadb(MARIADB_LEDGER.format(rows=ROWS))
    fetchers = {
        "fetcher_worker_s3": worker,
        "fetcher_worker_local": worker_local,
        "fetcher_embedded": embedded,
    }
    try:
        for processes in fetchers.values():
            processes.connect_mysql("bench_my", database, reader, password)
        select = _select(COLUMNS)
        floor = [
            "mariadb",
            "--batch",
            "--quick",
            "-h",
            "127.0.0.1",
            "-u",
            "root",
            database,
            "-e",
            select,
        ]
        print(f"MariaDB ledger, {ROWS:,} rows:", flush=True)
        floor_bytes = _output_bytes(floor)
        contenders = {"mariadb_cli": _floor_runner(floor, floor_bytes, _meter("mariadb", database))}
        mapped = {"bench_my": {"ledger": list(COLUMNS)}}
        for name, processes in fetchers.items():
            meter = _meter("mariadb", database, processes)
            contenders[name] = _fetcher_runner(processes, mapped, None, ROWS, meter)
        results = _summaries(_alternate(contenders), ROWS)
        return {
            "rows": ROWS,
            "results": results,
            "ratios": _ratios(results, list(fetchers), ["mariadb_cli"]),
            "summary": _table("mariadb", ROWS, results),
        }
    finally:
        for processes in fetchers.values():
            processes.delete_connection("bench_my")
        drop_mariadb(database, reader)


def _ledger_parts() -> dict[str, Any]:
    """The parts on ledgers, with one Worker → S3, one Worker → local store and one embedded
    process (the ``ROWS``-row PostgreSQL ledger only when a part on it runs)."""
    report: dict[str, Any] = {}
    postgres = bool(PARTS & {"postgres", "filtered"})
    database = create_postgres("ledger", PG_LEDGER.format(rows=ROWS if postgres else 0))
    try:
        with (
            FetcherProcesses("worker") as worker,
            FetcherProcesses("worker_local") as worker_local,
            FetcherProcesses("embedded") as embedded,
        ):
            for processes in (worker, worker_local, embedded):
                processes.connect_postgres("bench_pg", database)
            _warm_up(embedded, "bench_pg")  # starts embedded mode's encoder process
            if "postgres" in PARTS:
                report["postgres"] = postgres_part(worker, worker_local, embedded, database)
            if "sizes" in PARTS and SIZES:
                report["sizes"] = sizes_part(worker_local, embedded)
            if "filtered" in PARTS:
                report["filtered"] = filtered_part(worker, database)
            if "mariadb" in PARTS:
                report["mariadb"] = mariadb_part(worker, worker_local, embedded)
    finally:
        drop_postgres(database)
    return report


def _summary_lines(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every part's summary lines, in the order they ran."""
    lines: list[dict[str, Any]] = []
    for key in ("postgres", "sizes", "filtered", "mariadb"):
        part = report.get(key)
        if part is None:
            continue
        for value in [part] if "summary" in part else part.values():
            lines += value["summary"]
    return lines


def main() -> int:
    report: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(),
        "rows": ROWS,
        "reps": REPS,
        "size_list": SIZES if "sizes" in PARTS else [],
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    if PARTS & {"postgres", "sizes", "filtered", "mariadb"}:
        report.update(_ledger_parts())
        report["summary"] = _summary_lines(report)
    if "scaling" in PARTS and SCALING:
        with FetcherProcesses("worker") as fresh:
            report["scaling"] = scaling_part(fresh)
    if "wide" in PARTS and WIDE:
        with FetcherProcesses("worker") as fresh:
            report["wide"] = wide_part(fresh)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    write_report("extraction", report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
