"""``client.jobs``: list and search jobs (``GET /v1/fetcher``), sync and async.

``client.jobs.list(...)`` returns an iterator over every matching job, newest first; it asks
for the next page (``nextCursor``) only when the caller has consumed the current one, and stops
after the last. ``client.jobs.page(...)`` is one page (``JobPage``) for callers that keep the
cursor themselves. Errors are the client's typed errors (a cursor under other filters is a
``400 FET-0405`` ``ApiError`` naming ``cursor``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from fetcher.client.types import JobListItem, JobPage

__all__ = ["AsyncJobs", "Jobs", "job_query"]

Moment = str | date | datetime


def _moment(value: Moment | None) -> str | None:
    """A ``date`` as ``YYYY-MM-DD``; an aware ``datetime`` in RFC 3339; text as given."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("created_from/created_to datetimes must be timezone-aware")
        return value.isoformat()
    return value.isoformat()


def job_query(
    *,
    status: str | Iterable[str] | None = None,
    connection_id: str | None = None,
    created_from: Moment | None = None,
    created_to: Moment | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> dict[str, object | None]:
    """The query parameters of one page; ``status`` may be a list of states."""
    states = status if status is None or isinstance(status, str) else ",".join(status)
    return {
        "status": states,
        "connectionId": connection_id,
        "createdFrom": _moment(created_from),
        "createdTo": _moment(created_to),
        "limit": limit,
        "cursor": cursor,
    }


@dataclass(frozen=True, slots=True)
class Jobs:
    """``FetcherClient.jobs``."""

    fetch: Callable[[dict[str, object | None], str | None], JobPage]

    def page(self, *, product: str | None = None, **filters: Any) -> JobPage:
        """One page; filters as :func:`job_query` (``cursor`` included)."""
        return self.fetch(job_query(**filters), product)

    def list(self, *, product: str | None = None, **filters: Any) -> Iterator[JobListItem]:
        """Every matching job, newest first, following ``nextCursor`` lazily."""
        query = job_query(**filters)
        while True:
            page = self.fetch(query, product)
            yield from page["items"]
            if page["nextCursor"] is None:
                return
            query = {**query, "cursor": page["nextCursor"]}


@dataclass(frozen=True, slots=True)
class AsyncJobs:
    """``AsyncFetcherClient.jobs``."""

    fetch: Callable[[dict[str, object | None], str | None], Awaitable[JobPage]]

    async def page(self, *, product: str | None = None, **filters: Any) -> JobPage:
        return await self.fetch(job_query(**filters), product)

    async def list(
        self, *, product: str | None = None, **filters: Any
    ) -> AsyncIterator[JobListItem]:
        """Every matching job, newest first, following ``nextCursor`` lazily
        (``async for job in client.jobs.list(status="failed")``)."""
        query = job_query(**filters)
        while True:
            page = await self.fetch(query, product)
            for item in page["items"]:
                yield item
            if page["nextCursor"] is None:
                return
            query = {**query, "cursor": page["nextCursor"]}
