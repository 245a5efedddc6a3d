"""``client.jobs.list(...)``: an iterator over every matching job that follows ``nextCursor``,
sync and async, against the in-process Manager (the production app over SQLite)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, date, datetime, timedelta

import pytest

from fetcher.client import ApiError, FetcherClient
from fetcher.client.jobs import job_query
from fetcher.services.records import JobRecord, JobStatus
from tests.unit.client.bridge import LoopTransport
from tests.unit.client.conftest import InProcess

T0 = datetime(2026, 3, 1, tzinfo=UTC)
STATES: tuple[JobStatus, ...] = ("pending", "processing", "completed", "failed")


def record(n: int, status: JobStatus, source: str = "payments") -> JobRecord:
    created = T0 + timedelta(minutes=n)
    return JobRecord(
        id=f"0190{n:04x}-0000-7000-8000-{n:012x}",
        status=status,
        request_hash=f"{n:064x}",
        mapped_fields_json=json.dumps({"pg_main": {"public.t": ["*"]}}),
        metadata_json=json.dumps({"source": source}),
        created_at=created,
        updated_at=created,
        dedup_active=status in ("pending", "processing"),
        completed_at=created if status in ("completed", "failed") else None,
        error="boom" if status == "failed" else None,
    )


async def seed(manager: InProcess, count: int) -> list[JobRecord]:
    jobs = [record(n, STATES[n % 4], "payments" if n % 3 else "billing") for n in range(count)]
    for job in jobs:
        await manager.app.state.runtime.store.insert_job(job)
    return sorted(jobs, key=lambda j: j.created_at, reverse=True)


async def test_async_iterator_follows_every_page(manager: InProcess) -> None:
    jobs = await seed(manager, 45)
    seen = [job["id"] async for job in manager.client.jobs.list()]
    assert seen == [j.id for j in jobs]
    failed = [job async for job in manager.client.jobs.list(status=["failed"], limit=4)]
    assert [j["id"] for j in failed] == [j.id for j in jobs if j.status == "failed"]
    assert {j["metadata"]["error"] for j in failed} == {"boom"}
    billing = [j["id"] async for j in manager.client.jobs.list(product="billing", limit=5)]
    assert billing == [j.id for j in jobs if "billing" in j.metadata_json]


async def test_async_iterator_is_lazy(manager: InProcess) -> None:
    await seed(manager, 45)
    calls = 0
    fetch = manager.client.jobs.fetch

    async def counting(query: dict[str, object | None], product: str | None):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        return await fetch(query, product)

    iterator = type(manager.client.jobs)(counting).list(limit=10)
    first = [await anext(iterator) for _ in range(10)]
    assert len(first) == 10
    assert calls == 1
    await anext(iterator)
    assert calls == 2


async def test_sync_iterator_and_page(manager: InProcess) -> None:
    jobs = await seed(manager, 25)
    transport = LoopTransport(manager.app, asyncio.get_running_loop())

    def run() -> tuple[list[str], dict[str, object], list[str]]:
        with FetcherClient("http://127.0.0.1", transport=transport) as client:
            every = [job["id"] for job in client.jobs.list(limit=10)]
            page = client.list_jobs(status="completed,failed", limit=3)
            window = client.jobs.list(
                created_from=T0 + timedelta(minutes=20), created_to=date(2026, 3, 1)
            )
            return every, dict(page), [job["id"] for job in window]

    every, page, window = await asyncio.to_thread(run)
    assert every == [j.id for j in jobs]
    assert len(transport.requests) >= 3  # 25 jobs in pages of 10
    assert len(page["items"]) == 3  # type: ignore[arg-type]
    assert isinstance(page["nextCursor"], str)
    assert window == [j.id for j in jobs if j.created_at >= T0 + timedelta(minutes=20)]


async def test_errors_are_typed(manager: InProcess) -> None:
    with pytest.raises(ApiError) as caught:
        [job async for job in manager.client.jobs.list(status="done")]
    assert caught.value.code == "FET-0405"
    assert caught.value.fields == {"status": caught.value.message}
    await seed(manager, 3)
    page = await manager.client.list_jobs(limit=1)
    with pytest.raises(ApiError) as caught:
        await manager.client.list_jobs(limit=1, status="failed", cursor=page["nextCursor"])
    assert list(caught.value.fields or {}) == ["cursor"]


def test_job_query_spells_the_parameters() -> None:
    assert job_query(
        status=["failed", "pending"],
        connection_id="c",
        created_from=datetime(2026, 3, 1, 12, tzinfo=UTC),
        created_to=date(2026, 3, 2),
        limit=5,
    ) == {
        "status": "failed,pending",
        "connectionId": "c",
        "createdFrom": "2026-03-01T12:00:00+00:00",
        "createdTo": "2026-03-02",
        "limit": 5,
        "cursor": None,
    }
    with pytest.raises(ValueError, match="timezone-aware"):
        job_query(created_from=datetime(2026, 3, 1))
