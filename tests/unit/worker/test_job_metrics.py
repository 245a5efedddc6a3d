"""§15.2 job metrics of a Worker run with no servers: outcomes under bounded product, engine
and category labels, wait and run histograms, and the in-flight gauge back at zero."""

from __future__ import annotations

import pytest

from fetcher.services.metrics import (
    CATEGORIES,
    ENGINES,
    Metrics,
    ProductLabels,
    category_label,
    engine_label,
)
from fetcher.services.timeutil import SystemClock
from tests.unit.worker.conftest import World

MAPPED = {"pg": {"public.accounts": ["id", "balance"]}}
OUTCOMES = "fetcher_job_outcomes_total"


def _sample(metrics: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    return metrics.registry.get_sample_value(name, labels or {}) or 0.0


async def test_a_completed_job_counts_under_its_product_engine_and_no_category(
    world: World,
) -> None:
    metrics = world.extraction.metrics
    job_id = await world.submit(MAPPED)
    await world.handler.handle(world.delivery())
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "completed"
    labels = {"status": "completed", "product": "payments", "engine": "postgresql"}
    assert _sample(metrics, OUTCOMES, {**labels, "category": "none"}) == 1
    assert _sample(metrics, "fetcher_job_wait_seconds_count") == 1
    assert _sample(metrics, "fetcher_job_run_seconds_count", {"engine": "postgresql"}) == 1
    assert _sample(metrics, "fetcher_worker_jobs_in_flight") == 0


async def test_a_failed_job_counts_under_its_category(world: World) -> None:
    """The connection is deleted between creation and the run: §4.5 ``not_found`` before
    any datasource resolved, so the engine is ``none``."""
    metrics = world.extraction.metrics
    await world.submit(MAPPED)
    deleted = await world.store.soft_delete_connection(
        world.connection.id, SystemClock().now(), tenant=""
    )
    assert deleted
    await world.handler.handle(world.delivery())
    labels = {"status": "failed", "product": "payments", "engine": "none"}
    assert _sample(metrics, OUTCOMES, {**labels, "category": "not_found"}) == 1
    assert _sample(metrics, "fetcher_job_run_seconds_count", {"engine": "none"}) == 1
    assert _sample(metrics, "fetcher_worker_jobs_in_flight") == 0


def test_products_beyond_the_cap_share_other() -> None:
    label = ProductLabels(cap=2)
    assert [label(p) for p in ("a", "b", "c", "a", "d", "")] == [
        "a",
        "b",
        "other",
        "a",
        "other",
        "none",
    ]


@pytest.mark.parametrize(
    ("types", "expected"),
    [
        ((), "none"),
        (("POSTGRESQL",), "postgresql"),
        (("SQL_SERVER", "SQL_SERVER"), "sql_server"),
        (("MYSQL", "MONGODB"), "mixed"),
        (("CASSANDRA",), "other"),
    ],
)
def test_engine_label_is_a_closed_set(types: tuple[str, ...], expected: str) -> None:
    assert engine_label(types) == expected
    assert expected in ENGINES | {"other"}


def test_category_label_is_a_closed_set() -> None:
    assert category_label(None) == "none"
    assert category_label("timeout") == "timeout"
    assert category_label("made-up") == "other"
    assert {"none", "validation", "connect", "timeout", "internal"} <= CATEGORIES
