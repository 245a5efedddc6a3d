"""Sampling profile of one extraction job in a running Fetcher process (issue 12).

Starts the processes of ``FETCHER_BENCH_MODE`` (``worker`` or ``embedded``), creates the
benchmark ledger (``FETCHER_BENCH_ROWS``, default 500 000) in the source of
``FETCHER_BENCH_SOURCE`` (``postgres``, the default, or ``mariadb``: the same columns through
the MySQL connector), and records the extracting process with ``py-spy`` (the ``bench``
extra) while one job runs. Prints the functions with the most
samples, by own time (leaf) and by inclusive time, as shares of all samples; the raw collapsed
stacks stay in ``bench/results/``. Run: ``.venv/bin/python bench/profile_job.py``.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.extraction import COLUMNS, ledger_source
from bench.fetcher_processes import FetcherProcesses

ROWS = int(os.environ.get("FETCHER_BENCH_ROWS", "500000"))
MODE = os.environ.get("FETCHER_BENCH_MODE", "worker")
SOURCE = os.environ.get("FETCHER_BENCH_SOURCE", "postgres")
TOP = int(os.environ.get("FETCHER_BENCH_TOP", "25"))
RESULTS = Path(__file__).resolve().parent / "results"
PY_SPY = str(Path(sys.executable).with_name("py-spy"))


def _frame(text: str) -> str:
    """``function (path/to/file.py:line)`` → ``function (file.py)``."""
    name, _, where = text.partition(" (")
    return f"{name} ({Path(where.split(':')[0]).name})"


def summarize(raw: Path) -> str:
    own: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";")[1:] if f]
        if not frames:
            continue
        total += count
        threads[stack.split(";")[0] + " " + frames[0]] += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    lines = [f"{total} samples; by thread:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in threads.most_common(6)]
    lines.append("own time:")
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in own.most_common(TOP)]
    lines.append("inclusive:")
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(TOP)]
    return "\n".join(lines)


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    raw = RESULTS / f"profile-{SOURCE}-{MODE}-{time.strftime('%Y%m%dT%H%M%S')}.txt"
    with ledger_source(SOURCE, ROWS) as connect, FetcherProcesses(MODE) as processes:
        connect(processes)
        spy = subprocess.Popen(
            [PY_SPY, "record", "--pid", str(processes.pid), "--format", "raw", "--output",
             str(raw), "--rate", "200", "--threads"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(1.0)
        figure = processes.job({"bench_src": {"ledger": list(COLUMNS)}}, None)
        spy.send_signal(2)
        spy.wait(timeout=60)
    print(
        f"{SOURCE} {MODE}: {figure.status} in {figure.seconds:.2f}s, "
        f"CPU {figure.cpu_seconds:.2f}s, peak {figure.peak_rss_mib:.1f} MiB"
    )
    print(summarize(raw))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
