"""The event feed (contract §2.12): terminal job events read in order from the outbox.

``EventFeed.read`` returns rows with a ``feed_seq`` greater than ``after``, ascending, up to
``limit`` items and the §2.12 page byte cap, optionally of one ``type``, only of the caller's
tenant (§12.5) and, for a product-restricted token, of jobs of its products (§12.4). With
``wait`` > 0 and nothing to return it long-polls: it re-reads the store every ~200 ms, or sooner
when :meth:`EventFeed.notify` is called (the relay calls it after it assigns ``feed_seq``
values), until ``wait`` seconds have passed.

Each item is ``{"cursor","routingKey","headers","data","createdAt","publishedAt"?}``; ``data``
is the stored body itself (the bytes the broker receives), spliced verbatim into the response
by :func:`render_page`, so the feed reproduces the event bytes exactly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from fetcher.services.jsontext import compact_json
from fetcher.services.limits import DEFAULT_FEED_LIMIT, MAX_FEED_LIMIT, MAX_FEED_WAIT
from fetcher.services.records import EventType, OutboxRow
from fetcher.services.store_roles import FeedStore
from fetcher.services.timeutil import format_ms

__all__ = [
    "BATCH_ROWS",
    "MAX_FEED_LIMIT",
    "MAX_FEED_WAIT",
    "PAGE_BYTES",
    "EventFeed",
    "FeedPage",
    "render_page",
    "render_page_async",
]

POLL_INTERVAL_SECONDS = 0.2
#: §2.12 page size: items are added while the sum of their ``data`` byte lengths is at most
#: this; the item that first takes the sum over it is the last one included.
PAGE_BYTES = 4 * 1024 * 1024
#: Rows per store read (§13 "Bounded memory"): an event body can approach the 1 MiB request
#: limit, so a read never holds more than this many rows beyond the page it is building.
BATCH_ROWS = 8


@dataclass(frozen=True, slots=True)
class FeedPage:
    """The rows of one read and the ``next`` cursor (§2.12)."""

    rows: Sequence[OutboxRow]
    next: str


@dataclass(frozen=True, slots=True)
class _Scope:
    """Which rows one read sees: the tenant's (§12.5), of one type, and for a
    product-restricted token only its products' (§12.4)."""

    tenant: str
    products: frozenset[str] | None
    event_type: EventType | None

    async def read(self, store: FeedStore, after: int, limit: int) -> list[OutboxRow]:
        return await store.read_feed(
            after=after,
            limit=limit,
            event_type=self.event_type,
            tenant=self.tenant,
            products=self.products,
        )


@dataclass
class EventFeed:
    """Reads the outbox feed; ``notify`` wakes every waiting long-poll at once."""

    store: FeedStore
    poll_interval: float = POLL_INTERVAL_SECONDS
    _wakeup: asyncio.Event | None = field(default=None, init=False, repr=False)

    def notify(self) -> None:
        """New rows may be visible: wake every waiting reader (safe from the event loop)."""
        wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None:
            wakeup.set()

    def _current(self) -> asyncio.Event:
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        return self._wakeup

    async def read(
        self,
        *,
        after: int | None = None,
        limit: int = DEFAULT_FEED_LIMIT,
        event_type: EventType | None = None,
        wait: int = 0,
        tenant: str,
        products: frozenset[str] | None,
    ) -> FeedPage:
        """One §2.12 page; waits up to ``wait`` seconds for a first matching row.

        Rows are read in batches of at most :data:`BATCH_ROWS` and the page ends at ``limit``
        items or at the first item that takes the ``data`` byte sum over :data:`PAGE_BYTES`,
        so a read holds at most one page plus one batch, however large the events are.
        """
        start = after or 0
        requested = min(limit, BATCH_ROWS)
        scope = _Scope(tenant, products, event_type)
        batch = await self._first_batch(start, requested, scope, wait)
        rows: list[OutboxRow] = []
        size = 0
        largest = 0
        while batch:
            for row in batch:
                rows.append(row)
                size += len(row.body)
                largest = max(largest, len(row.body))
                if size > PAGE_BYTES or len(rows) >= limit:
                    return _page(rows, after)
            if len(batch) < requested:  # the store had no more rows
                break
            # Fewer rows when the largest seen so far would overshoot the cap anyway.
            room = PAGE_BYTES - size
            requested = min(limit - len(rows), BATCH_ROWS, room // max(largest, 1) + 1)
            last = rows[-1].feed_seq or start
            batch = await scope.read(self.store, last, requested)
        return _page(rows, after)

    async def _first_batch(
        self, start: int, count: int, scope: _Scope, wait: int
    ) -> list[OutboxRow]:
        """The first rows after ``start``; long-polls up to ``wait`` seconds for one."""
        deadline = time.monotonic() + wait
        while True:
            wakeup = self._current()
            rows = await scope.read(self.store, start, count)
            remaining = deadline - time.monotonic()
            if rows or remaining <= 0:
                return rows
            try:
                async with asyncio.timeout(min(self.poll_interval, remaining)):
                    await wakeup.wait()
            except TimeoutError:
                pass


def _page(rows: Sequence[OutboxRow], after: int | None) -> FeedPage:
    """``next`` is the last included item's cursor, else the request's ``after`` (or "0")."""
    last = rows[-1].feed_seq if rows else None
    return FeedPage(rows, str(last) if last is not None else str(after or 0))


def _item(row: OutboxRow) -> bytes:
    """One item, with the stored body spliced in as ``data``. ``headers`` are the eleven §8.4
    CloudEvents headers only: a tenant's stored event also keeps ``X-Tenant-ID`` for the
    relay's publish (§12.5), which is not a CloudEvents header and stays out of the feed."""
    head: dict[str, object] = {
        "cursor": str(row.feed_seq),
        "routingKey": row.routing_key,
        "headers": {k: v for k, v in row.headers.items() if k.startswith("ce-")},
    }
    tail: dict[str, object] = {"createdAt": format_ms(row.created_at)}
    if row.sent_at is not None:
        tail["publishedAt"] = format_ms(row.sent_at)
    head_text = compact_json(head)[:-1]
    tail_text = compact_json(tail)[1:]
    return head_text.encode() + b',"data":' + bytes(row.body).strip() + b"," + tail_text.encode()


def render_page(page: FeedPage) -> bytes:
    """The §2.12 response body: ``{"items":[…],"next":"<cursor>"}`` as UTF-8 JSON."""
    items = b",".join(_item(row) for row in page.rows)
    return b'{"items":[' + items + b'],"next":' + compact_json(page.next).encode() + b"}"


async def render_page_async(page: FeedPage) -> bytes:
    """:func:`render_page` in a worker thread (§13 "Blocking work"): encoding a page of up to
    ~5 MiB and 1,000 items never holds the event loop."""
    if not page.rows:
        return render_page(page)
    return await asyncio.to_thread(render_page, page)
