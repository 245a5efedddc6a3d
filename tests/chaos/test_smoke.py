"""The chaos smoke run (part of ``make test``; ``make chaos`` runs the full suite): three
short faults against a real Manager and two real Workers under a steady load of small jobs,
then every job checked from the outside (tests/chaos/scenarios.py).

* broker cut 4 s: the Manager answers 503 FET-0003 quickly while it cannot publish (§3.6
  step 16, the job is failed with its event), and work resumes right after;
* metadata store cut 4 s: 503 FET-0003 within ~1 s, never a hang (§2.3); the Workers ride
  it out (a short outage strands nothing);
* object storage cut 6 s mid-upload: the API is not affected at all; an upload that fails
  fails its job with no object left (§4.3 step 5).

No job may stay pending or processing: with faults this short nothing needs the §4.4 reaper,
so a stranded job is a failure here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.chaos.scenarios import (
    Scenario,
    ScenarioResult,
    check_invariants,
    outage,
    run_scenario,
    settle,
    storage_cut_mid_upload,
)
from tests.chaos.stack import ChaosStack, chaos_stack
from tests.services import POSTGRES_ADMIN_DSN, RABBITMQ_URL, service_missing

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

SCENARIOS = [
    Scenario("smoke_broker_cut", outage("broker"), 4.0, 3.0, rate=4.0, load_seconds=12),
    Scenario("smoke_metadata_cut", outage("metadata"), 4.0, 3.0, rate=4.0, load_seconds=12),
    Scenario("smoke_storage_cut", storage_cut_mid_upload(1.0), 6.0, 3.0, 4.0, load_seconds=14),
]
SETTLE_WITHIN = 60.0
RECOVERY_GOAL_SECONDS = 20.0
#: §2.3: a quick 503 while the store is unreachable (checkout bound 1 s, generous margin).
QUICK_ANSWER_SECONDS = 2.5


async def _require_services() -> None:
    import aio_pika
    import psycopg

    try:
        conn = await psycopg.AsyncConnection.connect(POSTGRES_ADMIN_DSN, connect_timeout=5)
        await conn.close()
    except psycopg.OperationalError as exc:
        service_missing("PostgreSQL", exc)
    try:
        await (await aio_pika.connect(RABBITMQ_URL, timeout=5)).close()
    except Exception as exc:
        service_missing("RabbitMQ", exc)


@pytest_asyncio.fixture
async def stack(tmp_path: Path) -> AsyncIterator[ChaosStack]:
    await _require_services()
    async with chaos_stack(tmp_path, workers=2) as running:
        yield running


async def test_three_faults_keep_every_promise(stack: ChaosStack) -> None:
    results: list[ScenarioResult] = []
    for scenario in SCENARIOS:
        results.append(await run_scenario(stack, scenario))
        await asyncio.sleep(2)
    await settle(stack, SETTLE_WITHIN)
    for result in results:
        await check_invariants(stack, result)
    summaries = {r.name: r.summary() for r in results}
    for name, summary in summaries.items():
        assert summary["invariant_violations"] == 0, summary
        assert summary["jobs"] >= 20, summary  # 48 submitted; a cut refuses up to ~20
        assert summary["completed"] > 0, summary
        assert summary["recovery_s"] is not None, summary
        assert summary["recovery_s"] <= RECOVERY_GOAL_SECONDS, summary
        assert summary["api_p99_during_fault_s"] < QUICK_ANSWER_SECONDS, (name, summary)
    storage = summaries["smoke_storage_cut"]
    assert storage["api_success_during_fault"] >= 0.99, storage
    metadata = summaries["smoke_metadata_cut"]
    assert set(metadata["api_status_during_fault"]) <= {"202", "503"}, metadata
