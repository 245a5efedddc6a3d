"""Issue 33 item 2: what serving a job list page of large jobs costs a running process.

For each store, a real ``fetcher run`` (embedded: SQLite metadata store; then a Manager over a
scratch PostgreSQL database, RabbitMQ on 127.0.0.1) gets ``FETCHER_BENCH_LIST_JOBS`` jobs
(default 100) written straight into its store, each with ``FETCHER_BENCH_METADATA_BYTES``
(default 900,000) of ``metadata`` (450 keys of 2,000 characters: the §2.2 limits allow it in a
1 MiB body). Then, after its peak RSS is reset (``/proc/<pid>/clear_refs``), it serves
``GET /v1/fetcher?limit=100`` once, and then 8 at once, while ``GET /health`` is timed every
20 ms. Printed and written under ``bench/results/``: the page size, the process's RSS before,
its peak (``VmHWM``) and the growth, and the slowest and median ``/health``.

Targets (issue 33): growth < 60 MiB, slowest ``/health`` < 100 ms.
Run: ``.venv/bin/python -m bench.list_memory`` (PostgreSQL, RabbitMQ on their test ports);
``FETCHER_BENCH_STORES=sqlite`` (or ``postgres``) runs one store.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench.support import ADMIN, FetcherProcesses, reset_peak, vm_hwm_mib, write_report
from fetcher.adapters.store import _common as c
from fetcher.services.records import JobRecord

JOBS = int(os.environ.get("FETCHER_BENCH_LIST_JOBS", "100"))
METADATA_BYTES = int(os.environ.get("FETCHER_BENCH_METADATA_BYTES", "900000"))
STORES = os.environ.get("FETCHER_BENCH_STORES", "sqlite,postgres").split(",")
CONCURRENT = 8
HEALTH_EVERY = 0.02
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _metadata() -> str:
    value = "m" * 2000
    keys = max(1, METADATA_BYTES // 2012)
    document = {"source": "payments", **{f"k{n:05d}": value for n in range(keys)}}
    return json.dumps(document, separators=(",", ":"))


def _rows(ts: Callable[[datetime], Any]) -> list[dict[str, Any]]:
    metadata = _metadata()
    rows = []
    for n in range(JOBS):
        created = T0 + timedelta(seconds=n)
        job = JobRecord(
            id=f"{n:08x}-0000-7000-8000-{secrets.token_hex(6)}",
            status="completed",
            request_hash=secrets.token_hex(32),
            mapped_fields_json='{"pg_main":{"public.orders":["id"]}}',
            metadata_json=metadata,
            created_at=created,
            updated_at=created,
            completed_at=created,
            dedup_active=False,
        )
        rows.append(c.job_params(job, ts))
    return rows


def _insert_sql(param: Callable[[str], str], columns: list[str]) -> str:
    values = ", ".join(param(name) for name in columns)
    return f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({values})"


def _load_sqlite(path: Path) -> None:
    rows = _rows(c.ts_text)
    with sqlite3.connect(path, timeout=30) as conn:
        conn.executemany(_insert_sql(lambda n: f":{n}", list(rows[0])), rows)


def _load_postgres(database: str) -> None:
    rows = _rows(c.utc_ms)
    conninfo = psycopg.conninfo.make_conninfo(ADMIN, dbname=database)
    with psycopg.connect(conninfo) as conn, conn.cursor() as cur:
        cur.executemany(_insert_sql(lambda n: f"%({n})s", list(rows[0])).encode(), rows)


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        body: bytes = response.read()
        return body


def _serve(base: str, pid: int, concurrent: int) -> dict[str, float]:
    """``concurrent`` page requests at once while ``/health`` is timed; the figures."""
    _get(f"{base}/v1/fetcher?limit=100")  # warm: first-use imports and caches
    before = _rss_mib(pid)
    reset_peak(pid)
    latencies: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            started = time.perf_counter()
            _get(f"{base}/health")
            latencies.append((time.perf_counter() - started) * 1000)
            time.sleep(HEALTH_EVERY)

    prober = threading.Thread(target=probe)
    prober.start()
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrent) as pool:
        sizes = list(
            pool.map(lambda _: len(_get(f"{base}/v1/fetcher?limit=100")), range(concurrent))
        )
    elapsed = time.perf_counter() - started
    time.sleep(0.1)
    done.set()
    prober.join()
    peak = vm_hwm_mib(pid)
    return {
        "page_bytes": float(max(sizes)),
        "seconds": round(elapsed, 3),
        "rss_before_mib": round(before, 1),
        "peak_rss_mib": round(peak, 1),
        "growth_mib": round(peak - before, 1),
        "health_max_ms": round(max(latencies), 1),
        "health_p50_ms": round(statistics.median(latencies), 1),
        "health_samples": float(len(latencies)),
    }


def _measure(mode: str) -> dict[str, dict[str, float]]:
    with FetcherProcesses(mode) as processes:
        if mode == "embedded":
            _load_sqlite(processes.metadata_file)
        else:
            _load_postgres(processes.metadata_database)
        page = json.loads(_get(f"{processes.base}/v1/fetcher?limit=100"))
        assert len(page["items"]) == min(JOBS, 100), len(page["items"])
        return {f"{n} at once": _serve(processes.base, processes.pid, n) for n in (1, CONCURRENT)}


def main() -> None:
    report: dict[str, Any] = {"jobs": JOBS, "metadata_bytes": len(_metadata())}
    for mode, store in (("embedded", "sqlite"), ("manager", "postgres")):
        if store not in STORES:
            continue
        report[store] = _measure(mode)
        for case, figures in report[store].items():
            print(
                f"{store:8} {case:10} page {figures['page_bytes'] / 1024:8.1f} KiB  "
                f"RSS {figures['rss_before_mib']:6.1f} -> {figures['peak_rss_mib']:6.1f} MiB "
                f"(+{figures['growth_mib']:5.1f})  /health max {figures['health_max_ms']:6.1f} ms"
                f" p50 {figures['health_p50_ms']:5.1f} ms",
                flush=True,
            )
    write_report("list_memory", report)


if __name__ == "__main__":
    main()
