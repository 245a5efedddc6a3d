"""Issue 33, item 4, in the SDK: ``jobs.list`` (sync and async) checks every page before it
yields a job — each wrong shape is one typed ``InvalidAnswerError`` naming what is wrong — and
stops a run of pages with no items and a cursor after three requests instead of asking for
ever. Items are :class:`Job` objects with attributes and the JSON keys."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fetcher.client import AsyncFetcherClient, FetcherClient, InvalidAnswerError, Job
from fetcher.client.jobs import MAX_EMPTY_PAGES

JOB = {
    "id": "0190a1b2-0000-7000-8000-000000000001",
    "status": "failed",
    "requestHash": "0" * 64,
    "createdAt": "2026-12-04T10:00:00.000Z",
    "metadata": {"source": "payments", "error": "boom"},
}


def answering(document: Any) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=document)

    return httpx.MockTransport(handler), seen


SHAPES = [
    ([], "the job list page is not a JSON object"),
    ("items", "the job list page is not a JSON object"),
    ({"nextCursor": None}, "page without an items list"),
    ({"items": {}, "nextCursor": None}, "page without an items list"),
    ({"items": [1, 2], "nextCursor": None}, "item 0: the job answer is not a JSON object"),
    ({"items": [JOB, {**JOB, "createdAt": 5}], "nextCursor": None}, "item 1: the job answer"),
    ({"items": [JOB]}, "page without nextCursor"),
    ({"items": [JOB], "nextCursor": ""}, "a nextCursor that is not text or null"),
]


@pytest.mark.parametrize(("document", "fragment"), SHAPES)
def test_sync_iterator_raises_one_typed_error_per_wrong_shape(document: Any, fragment: str) -> None:
    transport, _ = answering(document)
    with FetcherClient("http://f", transport=transport) as api:
        got: list[Job] = []
        with pytest.raises(InvalidAnswerError, match=fragment):
            got.extend(api.jobs.list())
    assert got == []  # nothing of a page is yielded before all of it is checked


@pytest.mark.parametrize(("document", "fragment"), SHAPES)
async def test_async_iterator_raises_the_same(document: Any, fragment: str) -> None:
    transport, _ = answering(document)
    async with AsyncFetcherClient("http://f", transport=transport) as api:
        with pytest.raises(InvalidAnswerError, match=fragment):
            [job async for job in api.jobs.list()]


def test_empty_pages_with_a_cursor_stop_after_three_requests() -> None:
    transport, seen = answering({"items": [], "nextCursor": "again"})
    with (
        FetcherClient("http://f", transport=transport) as api,
        pytest.raises(InvalidAnswerError, match="3 pages in a row with no items"),
    ):
        list(api.jobs.list())
    assert len(seen) == MAX_EMPTY_PAGES == 3
    assert [r.url.params.get("cursor") for r in seen] == [None, "again", "again"]


def test_items_are_jobs_with_attributes_and_keys() -> None:
    transport, _ = answering({"items": [JOB], "nextCursor": None})
    with FetcherClient("http://f", transport=transport) as api:
        (job,) = list(api.jobs.list())
        page = api.list_jobs()
    assert isinstance(job, Job)
    assert (job.id, job.status, job.error, job.product) == (JOB["id"], "failed", "boom", "payments")
    assert job["metadata"] == JOB["metadata"]
    assert job == JOB  # equal to the API's object
    assert json.loads(json.dumps(job.to_dict())) == JOB
    assert page.jobs == [job]
    assert page["nextCursor"] is None
    assert page.next_cursor is None
