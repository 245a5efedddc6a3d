"""``make chaos``: faults against a real Manager and two real Workers, with figures.

Every scenario runs a steady load of small jobs through the Manager while a chaos proxy
(tests/chaos/proxy.py) breaks one dependency, then the whole run settles (the §4.4 reapers
and the §8.6 repairer finish their work) and every job of every scenario is checked from the
outside (tests/chaos/scenarios.py: one terminal status, one ce-id, one feed item, one
verified object for a completed job, none for a failed one).

Writes ``bench/results/chaos.json`` (or ``--out``) and prints a table. ``--only a,b`` runs
some scenarios; ``--scale 0.5`` shortens loads and faults (the kill scenario keeps its
20 s period).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.chaos.scenarios import (
    SLOW_TABLE,
    Scenario,
    ScenarioResult,
    check_invariants,
    everything,
    kill_workers,
    latency,
    outage,
    run_scenario,
    settle,
    storage_cut_mid_upload,
)
from tests.chaos.stack import PENDING_TIMEOUT_SECONDS, STORAGE_TIMEOUT_SECONDS, chaos_stack

from bench.support import RESULTS

#: The longest a job can stay unfinished: the pending window, one reaper tick, slack.
SETTLE_SECONDS = PENDING_TIMEOUT_SECONDS + 30 + 60
GOAL_API_SUCCESS = 0.99
GOAL_RECOVERY_SECONDS = 20.0


def scenarios(scale: float) -> list[Scenario]:
    """The issue's seven scenarios; ``scale`` multiplies load and fault lengths."""

    def s(seconds: float) -> float:
        return max(3.0, seconds * scale)

    return [
        Scenario("broker_cut", outage("broker"), s(15), load_seconds=s(40)),
        Scenario("broker_slow", latency("broker", 0.3), s(20), load_seconds=s(40)),
        Scenario("metadata_cut", outage("metadata"), s(15), load_seconds=s(40)),
        Scenario("storage_cut", storage_cut_mid_upload(2.0), s(30), load_seconds=s(55)),
        Scenario(
            "source_cut", outage("source"), s(10), load_seconds=s(35), mapped=SLOW_TABLE, rate=3
        ),
        # 2 s jobs, so that every kill hits jobs mid-extraction (and prefetched messages).
        Scenario(
            "worker_kill",
            kill_workers(20.0),
            max(20.0, 120 * scale),
            load_seconds=s(140),
            rate=3,
            mapped=SLOW_TABLE,
        ),
        Scenario("all_at_once", everything(), s(8), load_seconds=s(30)),
    ]


async def run(selected: Sequence[Scenario], log_dir: Path, settle_for: float) -> dict[str, Any]:
    results: list[ScenarioResult] = []
    began = time.monotonic()
    async with chaos_stack(log_dir, workers=2) as stack:
        for scenario in selected:
            print(f"[chaos] {scenario.name}: fault {scenario.fault_seconds:.0f}s", flush=True)
            results.append(await run_scenario(stack, scenario))
            await asyncio.sleep(5)  # let the backlog of one scenario drain before the next
        print(f"[chaos] settling (at most {settle_for:.0f}s: §4.4 windows)", flush=True)
        waited = await settle(stack, settle_for)
        for result in results:
            await check_invariants(stack, result)
        summaries = [
            {**r.summary(), "rate_per_s": sc.rate, "jobs_kind": _kind(sc)}
            for r, sc in zip(results, selected, strict=True)
        ]
        workers = len(stack.workers)
    return {
        "machine": f"{platform.machine()}, {platform.system()} (2 shared cores)",
        "workers": 2,
        "workers_started_in_total": workers,
        "pending_timeout_seconds": PENDING_TIMEOUT_SECONDS,
        "storage_timeout_seconds": STORAGE_TIMEOUT_SECONDS,
        "job_timeout_seconds": 30,
        "settle_seconds": round(waited, 1),
        "wall_seconds": round(time.monotonic() - began, 1),
        "scenarios": summaries,
    }


def _kind(scenario: Scenario) -> str:
    return "2 s stream" if scenario.mapped == SLOW_TABLE else "20 rows"


def _fmt(value: object, pattern: str = "{}") -> str:
    return "-" if value is None else pattern.format(value)


def table(report: dict[str, Any]) -> str:
    head = (
        "| scenario | fault s | submitted | accepted | completed | failed | stranded "
        "| API ok (fault) | API p99 s (fault) | recovery s | violations | orphans (§4.4) |"
    )
    lines = [head, "|" + "---|" * 12]
    for row in report["scenarios"]:
        lines.append(
            f"| {row['scenario']} | {row['fault_seconds']} | {row['submitted']} "
            f"| {row['accepted']} | {row['completed']} | {row['failed']} | {row['stranded']} "
            f"| {_fmt(row['api_success_during_fault'], '{:.1%}')} "
            f"| {_fmt(row['api_p99_during_fault_s'])} | {_fmt(row['recovery_s'])} "
            f"| {row['invariant_violations']} | {row['allowed_orphans']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--settle", type=float, default=SETTLE_SECONDS)
    parser.add_argument("--out", type=Path, default=RESULTS / "chaos.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    chosen = scenarios(args.scale)
    if args.only:
        wanted = set(args.only.split(","))
        chosen = [s for s in chosen if s.name in wanted]
    logs = Path(tempfile.mkdtemp(prefix="fetcher-chaos-"))
    print(f"[chaos] process logs in {logs}", flush=True)
    report = asyncio.run(run(chosen, logs, args.settle))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))
    print(f"written to {args.out}")
    return 1 if any(r["invariant_violations"] for r in report["scenarios"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
