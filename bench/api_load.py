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
alive: a minimal HTTP/1.1 client on asyncio streams (:class:`KeepAlivePool`, up to 256
connections, one request at a time on each, a new one opened only when all are busy). httpx
was the client before: its pool cost 1.6 ms of CPU per request at 50 req/s but 12.8 ms at
100 req/s once hundreds of connections were open, 1.3 cores of the two, so the generator
starved the server it measured. An error is any other status or a transport failure. It runs on
the same two cores as the server: figures are from a shared, noisy machine.
Targets: new-job p99 < 100 ms and duplicate p99 < 20 ms at 50 req/s, 0 errors.

Each run also reports where the CPU went (milliseconds per request): the Manager, the Worker,
PostgreSQL (every backend of the bench's server, live or reaped: store pools, live tests, the
Worker's source sessions), RabbitMQ, SeaweedFS, the load generator, the whole machine
(``/proc/stat``) and ``other`` (the machine minus all of these: other users of the machine);
the new sessions PostgreSQL accepted (``pg_stat_database.sessions``) in the source database and
the metadata database; the jobs completed so far; and the 1-minute load average before and
after. PostgreSQL, RabbitMQ and SeaweedFS serve every user of the machine: for clean
PostgreSQL figures, point ``FETCHER_BENCH_POSTGRES_DSN`` at a server of the bench's own.

Knobs: ``FETCHER_BENCH_LOAD_RATES`` (``50,100``), ``FETCHER_BENCH_LOAD_SECONDS`` (``60``),
``FETCHER_BENCH_LOAD_KINDS`` (``new,duplicate``), ``FETCHER_BENCH_LOAD_WORKER`` (``1``; ``0``
runs the Manager alone: its own capacity; the jobs stay ``pending`` and their messages wait in
the bench's queue, deleted afterwards; no reaper runs, so ``PENDING_TIMEOUT_SECONDS`` plays no
part), ``FETCHER_BENCH_LOAD_WORKER_NICE`` (``0``; e.g. ``19`` runs the Worker at that niceness,
a stand-in for a Worker on cores of its own: here the Manager, the Worker, PostgreSQL,
RabbitMQ, SeaweedFS and the generator share two cores), ``FETCHER_BENCH_ENV_<NAME>=<value>``
(passed to the processes as ``<NAME>=<value>``).
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fetcher_processes import (
    FetcherProcesses,
    cpu_seconds,
    create_postgres,
    drop_postgres,
    postgres_scalar,
    postmaster_pid,
)

RATES = [int(r) for r in os.environ.get("FETCHER_BENCH_LOAD_RATES", "50,100").split(",") if r]
SECONDS = float(os.environ.get("FETCHER_BENCH_LOAD_SECONDS", "60"))
KINDS = [k for k in os.environ.get("FETCHER_BENCH_LOAD_KINDS", "new,duplicate").split(",") if k]
WITH_WORKER = os.environ.get("FETCHER_BENCH_LOAD_WORKER", "1") != "0"
WORKER_NICE = int(os.environ.get("FETCHER_BENCH_LOAD_WORKER_NICE", "0"))
ENV_PREFIX = "FETCHER_BENCH_ENV_"
RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"new": 0.100, "duplicate": 0.020}
_SOURCE = """
CREATE TABLE accounts (id int PRIMARY KEY, email text NOT NULL, balance numeric(12,2));
INSERT INTO accounts SELECT g, 'a' || g || '@example.com', g * 1.25 FROM generate_series(1, 20) g;
"""


def _server_pid(name: str) -> int:
    """The first process called ``name`` whose parent has another name (the postmaster, the
    RabbitMQ VM, SeaweedFS); 0 when there is none."""
    for stat in sorted(Path("/proc").glob("[0-9]*/stat"), key=lambda p: int(p.parent.name)):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm, parent = (
            text[text.index("(") + 1 : text.rindex(")")],
            text.rsplit(")", 1)[1].split()[1],
        )
        if comm == name and _comm(int(parent)) != name:
            return int(stat.parent.name)
    return 0


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid``, its reaped children (``cutime``/``cstime``) and its live ones."""
    if not pid:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(f) for f in fields[11:15]) / tick
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            total += cpu_seconds(int(child))
        except OSError:
            continue
    return total


def _machine_busy() -> float:
    """Busy CPU seconds of the whole machine (``/proc/stat``: all but idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds of each participant between :meth:`start` and :meth:`stop`."""

    def __init__(self, processes: FetcherProcesses, databases: dict[str, str]) -> None:
        # PostgreSQL (every backend of FETCHER_BENCH_POSTGRES_DSN's server), RabbitMQ and
        # SeaweedFS serve whatever else runs on the machine too; "other" is the machine minus
        # all of these (other users of the machine, the kernel's work for them).
        self._pids = {
            "manager": processes.manager_pid,
            "worker": processes.worker_pid,
            "postgres": postmaster_pid(),
            "rabbitmq": _server_pid("beam.smp"),
            "seaweedfs": _server_pid("weed"),
            "generator": os.getpid(),
        }
        self._databases = databases
        self._before: dict[str, float] = {}

    def _sample(self) -> dict[str, float]:
        sample = {"machine": _machine_busy()}
        for name, pid in self._pids.items():
            own = name in ("manager", "worker", "generator")  # the generator's children: M, W
            sample[name] = (cpu_seconds(pid) if own else _tree_cpu(pid)) if pid else 0.0
        for role, name in self._databases.items():
            sample[f"{role}_sessions"] = float(
                postgres_scalar(
                    "postgres", f"SELECT sessions FROM pg_stat_database WHERE datname = '{name}'"
                )
                or 0
            )
        return sample

    def start(self) -> None:
        self._before = self._sample()
        self._load_before = os.getloadavg()[0]

    def stop(self, requests: int) -> dict[str, Any]:
        after = self._sample()
        delta = {k: after[k] - self._before[k] for k in after}
        cpu = {k: round(v / requests * 1000, 2) for k, v in delta.items() if "sessions" not in k}
        cpu["other"] = round(cpu["machine"] - sum(cpu[k] for k in self._pids), 2)
        sessions = {k: int(v) for k, v in delta.items() if "sessions" in k}
        completed = postgres_scalar(
            self._databases["metadata"], "SELECT count(*) FROM jobs WHERE status = 'completed'"
        )
        return {
            "cpu_ms_per_request": cpu,
            "jobs_completed_so_far": int(completed or 0),
            "new_sessions": sessions,
            "load_average_1m": [round(self._load_before, 2), round(os.getloadavg()[0], 2)],
        }


def _body(correlation: str) -> dict[str, Any]:
    return {
        "dataRequest": {"mappedFields": {"bench_pg": {"accounts": ["id", "email", "balance"]}}},
        "metadata": {"source": "bench", "correlationId": correlation},
    }


class KeepAlivePool:
    """Kept-alive HTTP/1.1 connections to one server, one request at a time on each.

    A request takes an idle connection (one the server has closed meanwhile is dropped), or
    opens one while fewer than ``limit`` exist, else waits for one. Responses must carry a
    ``Content-Length`` (every Fetcher answer does)."""

    def __init__(self, host: str, port: int, limit: int = 256) -> None:
        self._host, self._port = host, port
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._slots = asyncio.Semaphore(limit)

    async def post(self, path: str, document: object) -> int:
        body = json.dumps(document).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        async with self._slots:
            reader, writer = await self._connection()
            try:
                writer.write(head + body)
                status, keep = await _response(reader)
            except BaseException:
                writer.close()
                raise
            if keep:
                self._idle.append((reader, writer))
            else:
                writer.close()
            return status

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while self._idle:
            reader, writer = self._idle.pop()
            if not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        return await asyncio.open_connection(self._host, self._port)

    def close(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()


async def _response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """The status of one response, and whether the connection stays open; reads its body."""
    lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = dict(line.split(":", 1) for line in lines[1:] if line)
    fields = {name.strip().lower(): value.strip().lower() for name, value in headers.items()}
    await reader.readexactly(int(fields["content-length"]))
    return status, fields.get("connection") != "close"


async def _one(
    client: KeepAlivePool, scheduled: float, body: dict[str, Any], expected: int
) -> tuple[float, str]:
    """(latency from the scheduled send time, the status code or the transport error's name)."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(30.0):
            outcome = str(await client.post("/v1/fetcher", body))
    except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError) as exc:
        outcome = type(exc).__name__
    return loop.time() - scheduled, outcome


async def fixed_rate(
    client: KeepAlivePool, rate: int, kind: str, meter: CpuMeter
) -> dict[str, Any]:
    """One open-loop run of ``SECONDS`` at ``rate`` requests/s."""
    loop = asyncio.get_running_loop()
    duplicate = _body(f"dup-{secrets.token_hex(6)}")
    if kind == "duplicate":  # the original job: every request of the run is its duplicate
        first = await client.post("/v1/fetcher", duplicate)
        if first != 202:
            raise RuntimeError(f"could not create the original job: {first}")
    expected = 200 if kind == "duplicate" else 202
    count = int(rate * SECONDS)
    await asyncio.sleep(1.0)  # the original job's work settles before the meter starts
    meter.start()
    start = loop.time() + 0.1
    tasks = []
    for i in range(count):
        scheduled = start + i / rate
        await asyncio.sleep(max(0.0, scheduled - loop.time()))
        body = duplicate if kind == "duplicate" else _body(f"new-{secrets.token_hex(8)}")
        tasks.append(asyncio.create_task(_one(client, scheduled, body, expected)))
    outcomes = await asyncio.gather(*tasks)
    costs = meter.stop(count)
    # Achieved rate: answers over the time from the first scheduled send to the last answer
    # (below ``rate`` when the server falls behind and the last answers arrive late).
    took = loop.time() - start
    latencies = sorted(latency for latency, _ in outcomes)
    errors = collections.Counter(o for _, o in outcomes if o != str(expected))
    achieved = {"wall_seconds": round(took, 3), "achieved_per_second": round(count / took, 1)}
    return {**_figures(kind, rate, latencies, errors), **achieved, **costs}


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


async def _run(base: str, meter: CpuMeter) -> list[dict[str, Any]]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    client = KeepAlivePool(host, int(port))
    try:
        figures = []
        for rate in RATES:
            for kind in KINDS:
                figures.append(await fixed_rate(client, rate, kind, meter))
                print(f"    {figures[-1]['cpu_ms_per_request']} {figures[-1]['new_sessions']}"
                      f" load {figures[-1]['load_average_1m']}", flush=True)  # fmt: skip
        return figures
    finally:
        client.close()


def main() -> int:
    database = create_postgres("load", _SOURCE)
    env = {k[len(ENV_PREFIX) :]: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    mode = "worker" if WITH_WORKER else "manager"
    try:
        with FetcherProcesses(mode, worker_nice=WORKER_NICE, **env) as processes:
            processes.connect_postgres("bench_pg", database)
            meta = processes.metadata_database
            meter = CpuMeter(processes, {"source": database, "metadata": meta})
            print(
                f"POST /v1/fetcher, open loop, {SECONDS:.0f} s per run, {mode} (nice {WORKER_NICE})"
                f" (Manager pid {processes.manager_pid}, Worker pid {processes.worker_pid}),"
                f" settings {env or 'default'}:",
                flush=True,
            )
            figures = asyncio.run(_run(processes.base, meter))
    finally:
        drop_postgres(database)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"api-load-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    summary = {
        "mode": mode,
        "worker_nice": WORKER_NICE,
        "settings": env,
        "runs": figures,
        "targets_ms": TARGETS,
    }
    path.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"written {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
