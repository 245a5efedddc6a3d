"""Scale-out: completed jobs per minute with 1, 2 and 4 Worker processes on one queue.

For each Worker count, on a fresh stack (the processes dial the servers directly: no chaos
proxy in the path): the Manager accepts ``--jobs`` small jobs while no
Worker runs (they wait on the queue), then the Workers start together and drain it. The
figure is jobs / (last ``completed_at`` − first ``started_at``) × 60, so the Manager's own
cost is not in it.

"Never taken twice" is shown three ways: every job has exactly one ``job claimed`` log line
over all Workers' output (the claim CAS of §4.2 logs it only when it matched), the Workers'
``fetcher_jobs_finished_total`` counters add up to the job count, and every job has exactly
one ``ce-id`` on the events queue and one object in the bucket (tests/chaos/scenarios.py).

Writes ``bench/results/scaleout.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.chaos.scenarios import FAST_TABLE, JOB_LIMITS, ScenarioResult, check_invariants, settle
from tests.chaos.stack import ChaosStack, chaos_stack
from tests.e2e.harness import PRODUCT, unique

from bench.support import RESULTS

FINISHED = "fetcher_jobs_finished_total"


async def submit_all(stack: ChaosStack, count: int) -> int:
    gate = asyncio.Semaphore(10)

    async def one() -> bool:
        body = {
            "dataRequest": {"mappedFields": FAST_TABLE, "limits": JOB_LIMITS},
            "metadata": {"source": PRODUCT, "correlationId": unique("scale"), "scenario": "scale"},
        }
        async with gate:
            response = await stack.launcher.http.post(f"{stack.api.base_url}/v1/fetcher", json=body)
            return response.status_code == 202

    return sum(await asyncio.gather(*(one() for _ in range(count))))


def claims_per_job(stack: ChaosStack) -> Counter[str]:
    claims: Counter[str] = Counter()
    for worker in stack.workers:
        for line in worker.stdout_path.read_text(errors="replace").splitlines():
            if '"job claimed"' in line:
                job_id = json.loads(line).get("job_id")
                if job_id:
                    claims[str(job_id)] += 1
    return claims


async def finished_total(stack: ChaosStack) -> float:
    total = 0.0
    for worker in stack.workers:
        samples = await worker.metrics(stack.launcher.http)
        total += sum(v for k, v in samples.items() if k.startswith(FINISHED + "{"))
    return total


async def measure(workers: int, jobs: int, log_dir: Path) -> dict[str, Any]:
    own_logs = log_dir / f"w{workers}"
    own_logs.mkdir(parents=True, exist_ok=True)
    info = {"LOG_LEVEL": "info"}  # the claim is logged at INFO
    async with chaos_stack(own_logs, workers=0, worker_env=info, direct=True) as stack:
        accepted = await submit_all(stack, jobs)
        began = time.monotonic()
        started = [stack.launcher.start_worker(**stack.worker_env) for _ in range(workers)]
        stack.workers.extend(started)
        for worker in started:
            await worker.wait_healthy(stack.launcher.http)
        await settle(stack, 240.0)
        wall = time.monotonic() - began
        _, rows = stack.metadata.query(
            "SELECT count(*) FILTER (WHERE status = 'completed'), min(started_at),"
            " max(completed_at) FROM jobs"
        )
        completed, first, last = rows[0]
        check = ScenarioResult("scale")
        await check_invariants(stack, check)
        claims = claims_per_job(stack)
        finished = await finished_total(stack)
    span = (last - first).total_seconds() if first and last else None
    return {
        "workers": workers,
        "jobs": accepted,
        "completed": int(completed),
        "span_seconds": None if span is None else round(span, 2),
        "jobs_per_minute": None if not span else round(completed / span * 60, 1),
        "wall_seconds_incl_start": round(wall, 1),
        "jobs_claimed_once": sum(1 for n in claims.values() if n == 1),
        "jobs_claimed_more_than_once": sum(1 for n in claims.values() if n > 1),
        "claim_log_lines": sum(claims.values()),
        "workers_finished_total": finished,
        "invariant_violations": len(check.violations),
        "violation_samples": check.violations[:5],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--out", type=Path, default=RESULTS / "scaleout.json")
    args = parser.parse_args(argv)
    logs = Path(tempfile.mkdtemp(prefix="fetcher-scaleout-"))
    rows = []
    for count in (int(n) for n in args.workers.split(",")):
        print(f"[scaleout] {count} worker(s), {args.jobs} jobs", flush=True)
        rows.append(asyncio.run(measure(count, args.jobs, logs)))
        print(json.dumps(rows[-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(
        "| Workers | jobs | completed | jobs/min | claimed twice | finished counters | violations |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['workers']} | {r['jobs']} | {r['completed']} | {r['jobs_per_minute']} "
            f"| {r['jobs_claimed_more_than_once']} | {r['workers_finished_total']:.0f} "
            f"| {r['invariant_violations']} |"
        )
    bad = any(r["jobs_claimed_more_than_once"] or r["invariant_violations"] for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
