"""§2.12 page size and §13 "Bounded memory": a feed page ends at the item that first takes the
sum of the ``data`` byte lengths over 4 MiB, and a read never holds more than one batch of rows
beyond the page, whatever ``limit`` asks for. Runs over a real SQLite metadata store."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Collection
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.services.events.feed import (
    BATCH_ROWS,
    PAGE_BYTES,
    EventFeed,
    FeedPage,
    render_page,
    render_page_async,
)
from fetcher.services.events.job_events import EventContext, failed_event
from fetcher.services.records import EventType, JobRecord, OutboxRow

CTX = EventContext(source="//lerian.fetcher/test", exchange="fetcher.job.events")
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
MIB = 1024 * 1024


class CountingStore(SqliteMetadataStore):
    """The real store, recording how many rows each ``read_feed`` returned."""

    reads: list[int]

    async def read_feed(
        self,
        *,
        after: int,
        limit: int,
        event_type: EventType | None = None,
        tenant: str,
        products: Collection[str] | None,
    ) -> list[OutboxRow]:
        rows = await super().read_feed(
            after=after, limit=limit, event_type=event_type, tenant=tenant, products=products
        )
        self.reads.append(len(rows))
        return rows


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[CountingStore]:
    async with CountingStore(tmp_path / "meta.db") as opened:
        await opened.migrate()
        opened.reads = []
        yield opened


def _job_id(n: int) -> str:
    return f"0190a1b2-0000-7000-8000-{n:012d}"


def _metadata(pad: int) -> str:
    return json.dumps({"pad": "a" * pad})


def _body_length(pad: int) -> int:
    return len(failed_event(CTX, _job_id(0), _metadata(pad), "boom", NOW).body)


async def _add_events(store: SqliteMetadataStore, *sizes: int) -> None:
    """One failed job per size; each event body is exactly ``size`` bytes."""
    fixed = _body_length(0)
    first = len(await store.jobs_with_status("failed"))
    for n, size in enumerate(sizes, start=first):
        metadata = _metadata(size - fixed)
        job_id = _job_id(n)
        await store.insert_job(
            JobRecord(
                id=job_id,
                status="pending",
                request_hash=job_id,
                mapped_fields_json='{"pg":{"t":["id"]}}',
                metadata_json=metadata,
                created_at=NOW,
                updated_at=NOW,
            )
        )
        event = failed_event(CTX, job_id, metadata, "boom", NOW)
        assert len(event.body) == size
        await store.fail_job(
            job_id, from_statuses=("pending",), error="boom", completed_at=NOW, event=event
        )


def test_the_cap_is_four_mebibytes() -> None:
    assert PAGE_BYTES == 4 * MIB


async def test_the_item_that_takes_the_sum_over_the_cap_is_the_last_one(
    store: CountingStore,
) -> None:
    await _add_events(store, *[MIB] * 7)
    page = await EventFeed(store).read(limit=1000, tenant="", products=None)
    # 4 x 1 MiB is exactly the cap, not over it: the fifth item goes over and ends the page.
    assert [row.feed_seq for row in page.rows] == [1, 2, 3, 4, 5]
    assert page.next == "5"
    rest = await EventFeed(store).read(after=int(page.next), limit=1000, tenant="", products=None)
    assert [row.feed_seq for row in rest.rows] == [6, 7]
    assert rest.next == "7"


async def test_an_item_larger_than_the_cap_is_a_page_of_its_own(store: CountingStore) -> None:
    await _add_events(store, 200, PAGE_BYTES + 10, 200)
    feed = EventFeed(store)
    first = await feed.read(tenant="", products=None)
    assert [row.feed_seq for row in first.rows] == [1, 2]
    second = await feed.read(after=int(first.next), tenant="", products=None)
    assert [row.feed_seq for row in second.rows] == [3]


async def test_small_items_fill_the_limit_and_no_row_is_skipped(store: CountingStore) -> None:
    await _add_events(store, *[300] * 45)
    feed = EventFeed(store)
    seen: list[int | None] = []
    after = 0
    while page := (await feed.read(after=after, limit=20, tenant="", products=None)).rows:
        assert len(page) <= 20
        seen += [row.feed_seq for row in page]
        after = int(page[-1].feed_seq or 0)
    assert seen == list(range(1, 46))
    assert (await feed.read(after=after, tenant="", products=None)).next == str(after)


async def test_a_read_holds_at_most_one_batch_of_rows(store: CountingStore) -> None:
    """``limit=1000`` over 1 MiB events reads a few rows at a time, never 1,000 at once."""
    await _add_events(store, *[MIB] * 12)
    page = await EventFeed(store).read(limit=1000, tenant="", products=None)
    assert len(page.rows) == 5
    assert store.reads
    assert max(store.reads) <= BATCH_ROWS
    assert sum(store.reads) <= len(page.rows) + BATCH_ROWS


async def test_the_type_filter_still_applies_across_batches(store: CountingStore) -> None:
    await _add_events(store, *[200] * (BATCH_ROWS * 3))
    page = await EventFeed(store).read(limit=1000, event_type="failed", tenant="", products=None)
    assert len(page.rows) == BATCH_ROWS * 3
    assert (
        await EventFeed(store).read(limit=1000, event_type="completed", tenant="", products=None)
    ).rows == []


async def test_the_page_is_encoded_the_same_off_the_event_loop(store: CountingStore) -> None:
    await _add_events(store, 500, 700)
    page = await EventFeed(store).read(tenant="", products=None)
    encoded = await render_page_async(page)
    assert encoded == render_page(page)
    assert [item["cursor"] for item in json.loads(encoded)["items"]] == ["1", "2"]
    empty = FeedPage([], "0")
    assert await render_page_async(empty) == b'{"items":[],"next":"0"}'
