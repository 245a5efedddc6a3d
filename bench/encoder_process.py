"""The batch encoder process on and off, side by side (issue 12, ``ENCODER_PROCESS_ENABLED``).

Starts two Fetcher setups of ``FETCHER_BENCH_MODE`` (``embedded``, the default, or
``worker``: Manager + Worker → the SeaweedFS S3 server), one with
``ENCODER_PROCESS_ENABLED=true`` and one with ``false``, over the same scratch ledger in
``FETCHER_BENCH_SOURCE`` (``postgres``, the default, or ``mariadb``)
(``FETCHER_BENCH_ROWS``, default 500 000, the ledger's columns, ``bench.support.ledger``), and runs
one job on each per repetition (``FETCHER_BENCH_REPS``, default 4), the order alternating.
Prints, per setting, the median job time (``completedAt − createdAt``), the median CPU
seconds and the highest peak RSS of the extracting process *with its children* (the encoder
process and multiprocessing's resource tracker: their ``VmHWM`` summed, an upper bound of
their peak together), and the speed ratio; writes them as JSON under ``bench/results/``.
Both setups must write documents of the same size (the bytes are the same by construction;
the tests compare them).
Run: ``.venv/bin/python -m bench.encoder_process``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from bench.support import COLUMNS, FetcherProcesses, JobFigure, ledger_source, write_report

ROWS = int(os.environ.get("FETCHER_BENCH_ROWS", "500000"))
REPS = int(os.environ.get("FETCHER_BENCH_REPS", "4"))
MODE = os.environ.get("FETCHER_BENCH_MODE", "embedded")
SOURCE = os.environ.get("FETCHER_BENCH_SOURCE", "postgres")


def _summary(figures: list[JobFigure]) -> dict[str, object]:
    return {
        "seconds": [round(f.seconds, 3) for f in figures],
        "median_seconds": round(statistics.median(f.seconds for f in figures), 3),
        "median_cpu_seconds": round(statistics.median(f.cpu_seconds for f in figures), 2),
        "peak_rss_mib": round(max(f.peak_rss_mib for f in figures), 1),
        "bytes": sorted({f.size for f in figures}),
    }


def main() -> int:
    runs: dict[str, list[JobFigure]] = {"true": [], "false": []}
    mapped = {"bench_src": {"ledger": list(COLUMNS)}}
    with (
        ledger_source(SOURCE, ROWS) as connect,
        FetcherProcesses(MODE, ENCODER_PROCESS_ENABLED="true") as on,
        FetcherProcesses(MODE, ENCODER_PROCESS_ENABLED="false") as off,
    ):
        setups = {"true": on, "false": off}
        for processes in setups.values():
            connect(processes)
            processes.job(mapped, None)  # warm-up, not counted: the first stream starts the child
        time.sleep(1.0)
        for rep in range(REPS):
            for flag in ("true", "false") if rep % 2 == 0 else ("false", "true"):
                figure = setups[flag].job(mapped, None)
                if figure.status != "completed":
                    raise RuntimeError(f"job ended {figure.status}: {figure.error}")
                runs[flag].append(figure)
                print(
                    f"  encoder process {flag:<5} {figure.seconds:6.2f}s  "
                    f"CPU {figure.cpu_seconds:5.2f}s  peak {figure.peak_rss_mib:6.1f} MiB",
                    flush=True,
                )
    report = {name: _summary(figures) for name, figures in runs.items()}
    if len({size for figures in runs.values() for size in (f.size for f in figures)}) != 1:
        raise RuntimeError(f"documents of different sizes: {report}")
    speed = statistics.median(f.seconds for f in runs["false"]) / statistics.median(
        f.seconds for f in runs["true"]
    )
    print(f"{SOURCE} {MODE}, {ROWS:,} rows, {REPS} repetitions: {json.dumps(report)}")
    print(f"speed with the encoder process / without: {speed:.2f}x")
    figures = {"source": SOURCE, "mode": MODE, "rows": ROWS, **report, "speed": speed}
    write_report(f"encoder-{SOURCE}-{MODE}", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
