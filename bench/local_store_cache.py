"""What the local store's page-cache advice saves (``fetcher.adapters.objectstore.local``).

A Worker or embedded process with a local result store keeps every object it writes. Without
the advice each object stays in the page cache, so every new one is written into pages the
kernel has to find afresh; with it, the writes reuse the same few windows of pages. This
script writes ``FETCHER_BENCH_OBJECTS`` objects (default 6) of ``FETCHER_BENCH_OBJECT_MIB``
MiB each (default 256) through :class:`LocalObjectStore`, in 1 MiB writes and keeping them
all, once with the advice and once without (``_FADVISE`` set to ``None``), in the order
``FETCHER_BENCH_ORDER`` (default ``without,with,without,with``), each round in a fresh
directory on the repository's file system that is removed afterwards. It reports each write's
wall and CPU seconds (this process's, user + system) and how much of the round's objects the
page cache holds at its end (util-linux ``fincore``).

Run: ``.venv/bin/python -m bench.local_store_cache``; the JSON goes to ``bench/results/``.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.support import write_report
from fetcher.adapters.objectstore import local
from fetcher.adapters.objectstore.local import LocalObjectStore

OBJECTS = int(os.environ.get("FETCHER_BENCH_OBJECTS", "6"))
OBJECT_MIB = int(os.environ.get("FETCHER_BENCH_OBJECT_MIB", "256"))
ORDER = os.environ.get("FETCHER_BENCH_ORDER", "without,with,without,with").split(",")
ROOT = Path(__file__).resolve().parent.parent
CHUNK = base64.b64encode(os.urandom(3 << 18))  # 1 MiB of base64, as the Worker writes


async def _write(store: LocalObjectStore, key: str) -> None:
    async with store.open_writer(key) as writer:
        for _ in range(OBJECT_MIB):
            await writer.write(CHUNK)


def _cached_mib(directory: Path) -> float:
    fincore = shutil.which("fincore")
    if fincore is None:
        raise SystemExit("fincore (util-linux) is needed to read the page cache's share")
    files = [str(path) for path in sorted(directory.iterdir())]
    out = subprocess.run(
        [fincore, "--bytes", "--noheadings", "--output", "RES", *files],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return round(sum(int(line) for line in out.split()) / (1 << 20), 1)


def _round(advised: bool) -> dict[str, Any]:
    original = local._FADVISE
    if not advised:
        local._FADVISE = None
    try:
        with tempfile.TemporaryDirectory(prefix="fetcher-bench-cache-", dir=ROOT) as name:
            directory = Path(name)
            store = LocalObjectStore(name)
            walls, cpus = [], []
            for index in range(OBJECTS):
                began, cpu_began = time.perf_counter(), time.process_time()
                asyncio.run(_write(store, f"object-{index}"))
                walls.append(round(time.perf_counter() - began, 3))
                cpus.append(round(time.process_time() - cpu_began, 3))
            cached = _cached_mib(directory)
    finally:
        local._FADVISE = original
    result = {
        "advice": "with" if advised else "without",
        "wall_seconds": walls,
        "cpu_seconds": cpus,
        "median_wall_seconds": statistics.median(walls),
        "median_cpu_seconds": statistics.median(cpus),
        "cached_mib_at_end": cached,
    }
    print(
        f"{result['advice']:>7} advice: median wall {result['median_wall_seconds']:.3f} s, "
        f"CPU {result['median_cpu_seconds']:.3f} s per {OBJECT_MIB} MiB object {cpus}; "
        f"{cached} of {OBJECTS * OBJECT_MIB} MiB cached at the end",
        flush=True,
    )
    return result


def main() -> None:
    report = {
        "started": datetime.now(UTC).isoformat(),
        "objects": OBJECTS,
        "object_mib": OBJECT_MIB,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "rounds": [_round(advice == "with") for advice in ORDER],
    }
    write_report("local-store-cache", report)


if __name__ == "__main__":
    main()
