"""§2.12 event feed through HTTP, including the long-poll."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from fetcher.services.events.job_events import EventContext, failed_event
from tests.unit.manager.conftest import Harness
from tests.unit.manager.test_http_rules import assert_error

E = "/v1/events"
CTX = EventContext(source="//lerian.fetcher/test", exchange="fetcher.job.events")


async def _fail_job(h: Harness, metadata: str = '{"source":"payments","amount":1.5}') -> str:
    """A pending job failed with its outbox event (what the publish-failure path writes)."""
    from fetcher.services.records import JobRecord

    now = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    job_id = f"0190a1b2-0000-7000-8000-{len(await h.store.jobs_with_status('failed')):012d}"
    await h.store.insert_job(
        JobRecord(
            id=job_id,
            status="pending",
            request_hash=job_id,
            mapped_fields_json='{"pg":{"t":["id"]}}',
            metadata_json=metadata,
            created_at=now,
            updated_at=now,
        )
    )
    event = failed_event(CTX, job_id, metadata, "work message was not processed", now)
    await h.store.fail_job(
        job_id,
        from_statuses=("pending",),
        error="work message was not processed",
        completed_at=now,
        event=event,
    )
    await h.store.assign_feed_seq()
    return job_id


async def test_empty_feed(h: Harness) -> None:
    assert (await h.client.get(E)).json() == {"items": [], "next": "0"}
    assert (await h.client.get(f"{E}?after=42")).json() == {"items": [], "next": "42"}


async def test_items_reproduce_the_stored_event(h: Harness) -> None:
    job_id = await _fail_job(h)
    response = await h.client.get(E)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    [item] = body["items"]
    assert body["next"] == item["cursor"] == "1"
    assert item["routingKey"] == "job.failed"
    assert item["headers"]["ce-id"] == f"fetcher.job.failed.{job_id}"
    assert item["headers"]["ce-time"] == "2026-01-02T03:04:05.678Z"
    assert {"t", "signature-version", "x-message-signature"}.isdisjoint(item["headers"])
    assert item["createdAt"] == "2026-01-02T03:04:05.678Z"
    assert "publishedAt" not in item
    [row] = await h.store.read_feed(after=0, limit=1, tenant="", products=None)
    assert json.dumps(item["data"], ensure_ascii=False, separators=(",", ":")).encode() == row.body
    assert row.body in response.content


async def test_published_at_after_ack(h: Harness) -> None:
    await _fail_job(h)
    [row] = await h.store.read_feed(after=0, limit=1, tenant="", products=None)
    await h.store.mark_sent([row.ce_id], datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC))
    [item] = (await h.client.get(E)).json()["items"]
    assert item["publishedAt"] == "2026-01-02T03:04:06.000Z"


async def test_after_limit_and_type(h: Harness) -> None:
    for _ in range(3):
        await _fail_job(h)
    page = (await h.client.get(f"{E}?limit=2")).json()
    assert [i["cursor"] for i in page["items"]] == ["1", "2"]
    assert page["next"] == "2"
    page = (await h.client.get(f"{E}?after={page['next']}")).json()
    assert [i["cursor"] for i in page["items"]] == ["3"]
    assert (await h.client.get(f"{E}?type=completed")).json()["items"] == []
    assert len((await h.client.get(f"{E}?type=failed")).json()["items"]) == 3


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("after=-1", "FET-0405"),
        ("after=", "FET-0405"),
        ("after=1234567890123456789", "FET-0405"),
        ("limit=0", "FET-0405"),
        ("limit=x", "FET-0405"),
        ("limit=1001", "FET-0406"),
        ("type=started", "FET-0405"),
        ("wait=31", "FET-0405"),
        ("wait=-1", "FET-0405"),
        ("wait=1.5", "FET-0405"),
    ],
)
async def test_parameter_errors(h: Harness, query: str, code: str) -> None:
    assert_error(await h.client.get(f"{E}?{query}"), 400, code)


async def test_boundaries_pass(h: Harness) -> None:
    query = "after=123456789012345678&limit=1000&wait=0"
    assert (await h.client.get(f"{E}?{query}")).status_code == 200


async def test_long_poll_returns_when_an_event_arrives(h: Harness) -> None:
    h.runtime.feed.poll_interval = 30  # only notify() can wake it in time

    async def produce() -> None:
        await asyncio.sleep(0.2)
        await _fail_job(h)
        h.runtime.feed.notify()

    loop = asyncio.get_running_loop()
    started = loop.time()
    response, _ = await asyncio.gather(h.client.get(f"{E}?wait=10"), produce())
    assert loop.time() - started < 5
    assert len(response.json()["items"]) == 1


async def test_long_poll_polls_the_store(h: Harness) -> None:
    h.runtime.feed.poll_interval = 0.05

    async def produce() -> None:
        await asyncio.sleep(0.2)
        await _fail_job(h)

    response, _ = await asyncio.gather(h.client.get(f"{E}?wait=5"), produce())
    assert len(response.json()["items"]) == 1


async def test_long_poll_times_out_empty(h: Harness) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    response = await h.client.get(f"{E}?wait=1&after=5")
    assert 0.9 <= loop.time() - started < 3
    assert response.json() == {"items": [], "next": "5"}
