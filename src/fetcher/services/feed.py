"""The event feed (contract §2.12): terminal job events read in order from the outbox.

``EventFeed.read`` returns rows with a ``feed_seq`` greater than ``after``, ascending, up to
``limit``, optionally of one ``type``. With ``wait`` > 0 and nothing to return it long-polls:
it re-reads the store every ~200 ms, or sooner when :meth:`EventFeed.notify` is called (the
relay calls it after it assigns ``feed_seq`` values), until ``wait`` seconds have passed.

Each item is ``{"cursor","routingKey","headers","data","createdAt","publishedAt"?}``; ``data``
is the stored body itself (the bytes the broker receives), spliced verbatim into the response
by :func:`render_page`, so the feed reproduces the event bytes exactly.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from fetcher.services.ports import MetadataStore
from fetcher.services.records import EventType, OutboxRow
from fetcher.services.timeutil import format_ms

__all__ = ["MAX_FEED_LIMIT", "MAX_FEED_WAIT", "EventFeed", "FeedPage", "render_page"]

#: §2.12 bounds.
MAX_FEED_LIMIT = 1000
MAX_FEED_WAIT = 30
DEFAULT_FEED_LIMIT = 100
POLL_INTERVAL_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class FeedPage:
    """The rows of one read and the ``next`` cursor (§2.12)."""

    rows: Sequence[OutboxRow]
    next: str


@dataclass
class EventFeed:
    """Reads the outbox feed; ``notify`` wakes every waiting long-poll at once."""

    store: MetadataStore
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
    ) -> FeedPage:
        """One §2.12 page; waits up to ``wait`` seconds for a first matching row."""
        deadline = time.monotonic() + wait
        start = after or 0
        while True:
            wakeup = self._current()
            rows = await self.store.read_feed(after=start, limit=limit, event_type=event_type)
            remaining = deadline - time.monotonic()
            if rows or remaining <= 0:
                break
            try:
                async with asyncio.timeout(min(self.poll_interval, remaining)):
                    await wakeup.wait()
            except TimeoutError:
                pass
        last = rows[-1].feed_seq if rows else None
        return FeedPage(rows, str(last) if last is not None else str(after or 0))


def _item(row: OutboxRow) -> bytes:
    """One item, with the stored body spliced in as ``data``."""
    head: dict[str, object] = {
        "cursor": str(row.feed_seq),
        "routingKey": row.routing_key,
        "headers": dict(row.headers),
    }
    tail: dict[str, object] = {"createdAt": format_ms(row.created_at)}
    if row.sent_at is not None:
        tail["publishedAt"] = format_ms(row.sent_at)
    head_text = _dumps(head)[:-1]
    tail_text = _dumps(tail)[1:]
    return head_text.encode() + b',"data":' + bytes(row.body).strip() + b"," + tail_text.encode()


def render_page(page: FeedPage) -> bytes:
    """The §2.12 response body: ``{"items":[…],"next":"<cursor>"}`` as UTF-8 JSON."""
    items = b",".join(_item(row) for row in page.rows)
    return b'{"items":[' + items + b'],"next":' + _dumps(page.next).encode() + b"}"


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
