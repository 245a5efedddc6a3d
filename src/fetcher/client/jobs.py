"""``client.jobs``: list and search jobs (``GET /v1/fetcher``), sync and async.

``client.jobs.list(...)`` returns an iterator over every matching job (:class:`Job` objects),
newest first; it asks for the next page (``nextCursor``) only when the caller has consumed the
current one, and stops after the last. ``client.jobs.page(...)`` is one page
(:class:`JobListPage`) for callers that keep the cursor themselves. Errors are the client's
typed errors (a cursor under other filters is a ``400 FET-0405`` ``ApiError`` naming
``cursor``).

A page is checked before any of it is used: an object with an ``items`` list of job objects
(each with text ``id``, ``status`` and ``createdAt``) and a ``nextCursor`` that is null or
text of at most :data:`MAX_CURSOR_CHARS` characters. Anything else raises
:class:`~fetcher.client.errors.InvalidAnswerError` naming what is wrong, never the server's
value. A Manager never answers a page with no items and a cursor more than once in a row
(keyset pages end where the matches end), so after :data:`MAX_EMPTY_PAGES` such pages in a
row the iterator stops with ``InvalidAnswerError`` instead of asking forever.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from fetcher.client.errors import InvalidAnswerError
from fetcher.client.objects import ApiObject, Job

__all__ = ["MAX_CURSOR_CHARS", "MAX_EMPTY_PAGES", "AsyncJobs", "JobListPage", "Jobs", "job_query"]

Moment = str | date | datetime
#: Pages with no items and a cursor tolerated in a row before the listing stops.
MAX_EMPTY_PAGES = 3
#: The longest ``nextCursor`` used (a Manager's cursor is under 200 characters).
MAX_CURSOR_CHARS = 4096


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


class JobListPage(ApiObject):
    """One page of ``GET /v1/fetcher``: :attr:`jobs` (``page["items"]``) and
    :attr:`next_cursor` (``page["nextCursor"]``, None on the last page)."""

    __slots__ = ()
    _kind = "job list page"

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        items = self._data.get("items")
        if not isinstance(items, list):
            raise InvalidAnswerError("the job list answered a page without an items list")
        if "nextCursor" not in self._data:
            raise InvalidAnswerError("the job list answered a page without nextCursor")
        cursor = self._data["nextCursor"]
        if cursor is not None and not (isinstance(cursor, str) and cursor):
            raise InvalidAnswerError("the job list answered a nextCursor that is not text or null")
        if cursor is not None and len(cursor) > MAX_CURSOR_CHARS:
            raise InvalidAnswerError(
                f"the job list answered a nextCursor over {MAX_CURSOR_CHARS} characters"
            )
        jobs = []
        for index, item in enumerate(items):
            try:
                jobs.append(Job(item))
            except InvalidAnswerError as exc:
                raise InvalidAnswerError(f"the job list answered item {index}: {exc}") from None
        self._data["items"] = jobs

    @property
    def jobs(self) -> list[Job]:
        return list(self._data["items"])

    @property
    def next_cursor(self) -> str | None:
        cursor = self._data["nextCursor"]
        return cursor if isinstance(cursor, str) else None


class _EmptyPages:
    """Counts pages in a row that hold no items but a cursor (see the module docstring)."""

    def __init__(self) -> None:
        self._seen = 0

    def check(self, page: JobListPage) -> None:
        if page.jobs or page.next_cursor is None:
            self._seen = 0
            return
        self._seen += 1
        if self._seen >= MAX_EMPTY_PAGES:
            raise InvalidAnswerError(
                f"the job list answered {self._seen} pages in a row with no items and a "
                "nextCursor; stopped"
            )


@dataclass(frozen=True, slots=True)
class Jobs:
    """``FetcherClient.jobs``."""

    fetch: Callable[[dict[str, object | None], str | None], JobListPage]

    def page(self, *, product: str | None = None, **filters: Any) -> JobListPage:
        """One page; filters as :func:`job_query` (``cursor`` included)."""
        return self.fetch(job_query(**filters), product)

    def list(self, *, product: str | None = None, **filters: Any) -> Iterator[Job]:
        """Every matching job, newest first, following ``nextCursor`` lazily."""
        query, empty = job_query(**filters), _EmptyPages()
        while True:
            page = self.fetch(query, product)
            empty.check(page)
            yield from page.jobs
            if page.next_cursor is None:
                return
            query = {**query, "cursor": page.next_cursor}


@dataclass(frozen=True, slots=True)
class AsyncJobs:
    """``AsyncFetcherClient.jobs``."""

    fetch: Callable[[dict[str, object | None], str | None], Awaitable[JobListPage]]

    async def page(self, *, product: str | None = None, **filters: Any) -> JobListPage:
        return await self.fetch(job_query(**filters), product)

    async def list(self, *, product: str | None = None, **filters: Any) -> AsyncIterator[Job]:
        """Every matching job, newest first, following ``nextCursor`` lazily
        (``async for job in client.jobs.list(status="failed")``)."""
        query, empty = job_query(**filters), _EmptyPages()
        while True:
            page = await self.fetch(query, product)
            empty.check(page)
            for item in page.jobs:
                yield item
            if page.next_cursor is None:
                return
            query = {**query, "cursor": page.next_cursor}
