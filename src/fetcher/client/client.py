"""Typed Manager API clients over httpx: :class:`FetcherClient` (sync) and
:class:`AsyncFetcherClient` (async). Same methods, same arguments, same results.

* Every non-2xx answer raises a typed :class:`~fetcher.client.errors.ApiError` carrying
  ``code``, ``title``, ``message`` and ``fields`` (§2.2); no answer raises ``TransportError``.
* ``token`` (a str, or a function returning the current one; the async client also awaits
  an async function) adds ``Authorization: Bearer <token>`` to every business route (§12.1),
  never to the open operational ones. It never appears in ``repr`` or in an error: a 401 is
  ``AuthenticationError`` (with the ``www_authenticate`` challenge), a 403
  ``PermissionDeniedError`` (``missing_scope`` for FET-0011).
* ``submit`` returns a :class:`Submission` whose ``duplicate`` tells a new job (202) from the
  existing one (200, §3.8); ``get_job``, ``wait`` and ``jobs.list`` return :class:`Job` objects
  (:mod:`fetcher.client.objects`: attributes such as ``job.status``, and ``job["status"]``
  still works); ``wait`` polls ``GET /v1/fetcher/{id}`` with a capped backoff until
  ``completed`` or ``failed``, or raises ``WaitTimeoutError``.
* Every answer is read as a stream and at most ``max_answer_bytes`` (after content decoding;
  default :data:`DEFAULT_MAX_ANSWER_BYTES`) are kept: a larger one stops the read, closes the
  connection and raises :class:`~fetcher.client.errors.InvalidAnswerError`, as does a success
  body that is not JSON or a feed page without ``items`` and a cursor ``next``.
* Pass ``transport=httpx.ASGITransport(app)`` (or any httpx transport) to test in-process.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, cast

import httpx

from fetcher.client import _core
from fetcher.client._core import Backoff, Call, Route
from fetcher.client.jobs import AsyncJobs, JobListPage, Jobs, job_query
from fetcher.client.objects import Job, Submission
from fetcher.client.results import ResultDownload
from fetcher.client.types import (
    ConnectionCreate,
    ConnectionPage,
    ConnectionResponse,
    ConnectionUpdate,
    FeedItem,
    FeedPage,
    HealthBody,
    MappedFields,
    ReadyzBody,
    SchemaResponse,
    TestResult,
    ValidateSchemaSuccess,
    VersionBody,
)

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "AsyncFetcherClient",
    "AsyncTokenSource",
    "FetcherClient",
    "Submission",
    "TokenSource",
]

DEFAULT_TIMEOUT = 30.0
#: The largest answer a client reads by default: a §2.12 feed page holds ~4 MiB of event
#: data, a schema answer of thousands of tables a few MiB; nothing the Manager sends is near.
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024
#: The feed's long-poll can hold a request for 30 s (§2.12): reads need more than that.
FEED_READ_TIMEOUT = 45.0


#: A bearer token, or a function returning the current one, called before every business
#: request (so a caller can hand out a fresh short-lived token each time).
TokenSource = str | Callable[[], str]
#: As :data:`TokenSource`; the async client also awaits a function that returns an awaitable.
AsyncTokenSource = str | Callable[[], str | Awaitable[str]]


class _Base:
    def __init__(
        self, base_url: str, token: AsyncTokenSource | None, max_answer_bytes: int
    ) -> None:
        if max_answer_bytes < 1:
            raise ValueError("max_answer_bytes must be at least 1")
        self.max_answer_bytes = max_answer_bytes
        self.base_url = base_url.rstrip("/")
        if isinstance(token, str):
            _core.checked_token(token)
        elif token is not None and not callable(token):
            raise TypeError("token must be a str or a function returning one")
        self.__token = token

    def __repr__(self) -> str:
        auth = ", token=<redacted>" if self.__token is not None else ""
        return f"{type(self).__name__}({self.base_url!r}{auth})"

    def _token_value(self, route: Route) -> str | Awaitable[str] | None:
        """The static token, or what the token function returns (not yet awaited); None for
        an operational route or a client without a token (the function is then not called)."""
        if self.__token is None or route.scope is None:
            return None
        return self.__token if isinstance(self.__token, str) else self.__token()

    def download_result(self, job_id: str) -> ResultDownload:
        """§14.2: the stored (encrypted) object of ``job_id`` as an object source for the
        consumer kit's ``open_result``, streamed from ``GET /v1/fetcher/{id}/result`` with
        this client's token (needs ``fetcher:results:read``). Nothing is sent until read."""
        return ResultDownload(self.base_url, job_id, token=self.__token)

    def _request(self, call: Call, token: object) -> httpx.Request:
        """The request of ``call``, with the bearer ``token`` (checked) on a business route."""
        timeout = httpx.Timeout(DEFAULT_TIMEOUT, read=FEED_READ_TIMEOUT)
        auth = _core.auth_headers(call.route, None if token is None else _core.checked_token(token))
        return httpx.Request(
            call.route.method,
            self.base_url + call.url,
            params=call.params,
            headers={**auth, **call.headers},
            content=call.body,
            extensions={"timeout": timeout.as_dict()},
        )


class FetcherClient(_Base):
    """Synchronous client. Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        base_url: str,
        *,
        token: TokenSource | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        super().__init__(base_url, token, max_answer_bytes)
        self._http = httpx.Client(transport=transport, timeout=timeout)

    def __enter__(self) -> FetcherClient:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call) -> tuple[httpx.Response, Any]:
        token = self._token_value(call.route)
        if inspect.isawaitable(token):
            _close_unawaited(token)
            raise TypeError("the token function returned an awaitable: use AsyncFetcherClient")
        request = self._request(call, token)
        with _core.transport_errors():
            response = self._http.send(request, stream=True)
            try:
                body = _core.BoundedBody(response, self.max_answer_bytes)
                for chunk in response.iter_bytes():
                    body.add(chunk)
            finally:
                response.close()
        return response, _core.parse(call, response, body.content)

    def _do(self, name: str, **kw: Any) -> Any:
        return self._send(_core.build(name, **kw))[1]

    # --- connections (§2.6) ---------------------------------------------------------------

    def create_connection(
        self, connection: ConnectionCreate, *, product: str
    ) -> ConnectionResponse:
        return cast(
            ConnectionResponse,
            self._do("create_connection", body=connection, headers={"X-Product-Name": product}),
        )

    def list_connections(self, *, product: str | None = None, **filters: Any) -> ConnectionPage:
        """Filters: ``limit``, ``page``, ``sort_order``, ``type``, ``start_date``,
        ``end_date``, ``metadata`` (a mapping matched as ``metadata.<key>``)."""
        query = _core.list_query(**_list_filters(filters))
        headers = {"X-Product-Name": product}
        return cast(ConnectionPage, self._do("list_connections", query=query, headers=headers))

    def list_unassigned(self, **filters: Any) -> ConnectionPage:
        query = _core.list_query(**_list_filters(filters))
        return cast(ConnectionPage, self._do("list_unassigned", query=query))

    def get_connection(self, connection_id: str) -> ConnectionResponse:
        return cast(ConnectionResponse, self._do("get_connection", path_id=connection_id))

    def update_connection(
        self, connection_id: str, changes: ConnectionUpdate
    ) -> ConnectionResponse:
        body = self._do("update_connection", path_id=connection_id, body=changes)
        return cast(ConnectionResponse, body)

    def delete_connection(self, connection_id: str) -> None:
        self._do("delete_connection", path_id=connection_id)

    def test_connection(self, connection_id: str) -> TestResult:
        return cast(TestResult, self._do("test_connection", path_id=connection_id))

    def connection_schema(
        self, connection_id: str, *, schemas: list[str] | None = None
    ) -> SchemaResponse:
        query = {"schemas": ",".join(schemas) if schemas else None}
        body = self._do("connection_schema", path_id=connection_id, query=query)
        return cast(SchemaResponse, body)

    def validate_schema(self, mapped_fields: MappedFields) -> ValidateSchemaSuccess:
        """Raises ``SchemaValidationError`` (422, ``errors``) when something does not exist."""
        body = self._do("validate_schema", body={"mappedFields": mapped_fields})
        return cast(ValidateSchemaSuccess, body)

    def assign_connection(self, connection_id: str, *, product: str) -> ConnectionResponse:
        headers = {"X-Product-Name": product}
        body = self._do("assign_connection", path_id=connection_id, headers=headers)
        return cast(ConnectionResponse, body)

    # --- jobs (§2.8) ----------------------------------------------------------------------

    def submit(
        self,
        mapped_fields: Mapping[str, Mapping[str, list[str]]],
        *,
        metadata: Mapping[str, Any],
        filters: Mapping[str, Any] | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> Submission:
        body = _core.job_request(mapped_fields, metadata, filters, limits)
        response, parsed = self._send(_core.build("submit", body=body))
        return _core.submission(response, parsed)

    def get_job(self, job_id: str) -> Job:
        return _core.job(self._do("get_job", path_id=job_id))

    def cancel(self, job_id: str) -> Job:
        """§14.4: cancel a pending or processing job; the job, now ``canceled``. A job that
        already ended raises ``ApiError`` (409 ``FET-1104``)."""
        return _core.job(self._do("cancel", path_id=job_id))

    def retry(self, job_id: str) -> Submission:
        """§14.5: submit a failed or canceled job's request again; answered as :meth:`submit`
        (the new job records ``retryOf``). Another status raises ``ApiError`` (409
        ``FET-1105``)."""
        response, parsed = self._send(_core.build("retry", path_id=job_id))
        return _core.submission(response, parsed)

    def list_jobs(self, *, product: str | None = None, **filters: Any) -> JobListPage:
        """One page of ``GET /v1/fetcher``; filters as :func:`fetcher.client.jobs.job_query`.
        :attr:`jobs` iterates over every page."""
        return self._job_page(job_query(**filters), product)

    def _job_page(self, query: dict[str, object | None], product: str | None) -> JobListPage:
        headers = {"X-Product-Name": product}
        return JobListPage(self._do("list_jobs", query=query, headers=headers))

    @property
    def jobs(self) -> Jobs:
        """``client.jobs.list(status="failed")``: every matching job, following the cursor."""
        return Jobs(self._job_page)

    def wait(self, job_id: str, *, timeout: float = 300.0, poll_interval: float = 0.25) -> Job:
        """Poll until the job is ``completed`` or ``failed``; ``WaitTimeoutError`` after
        ``timeout`` seconds. Intervals double from ``poll_interval`` up to 2 s."""
        deadline, backoff = time.monotonic() + timeout, Backoff(poll_interval, 2.0)
        while True:
            job = self.get_job(job_id)
            remaining = deadline - time.monotonic()
            if _core.settled(job_id, job, remaining):
                return job
            time.sleep(backoff(remaining))

    # --- event feed (§2.12) ----------------------------------------------------------------

    def events(
        self,
        *,
        after: str | None = None,
        limit: int | None = None,
        type: str | None = None,
        wait: int | None = None,
    ) -> FeedPage:
        query = {"after": after, "limit": limit, "type": type, "wait": wait}
        return cast(FeedPage, self._do("events", query=query))

    def follow_events(self, *, after: str = "0", wait: int = 30) -> Iterator[FeedItem]:
        """Every feed item after ``after``, forever, long-polling ``wait`` seconds per page."""
        while True:
            items, after = _core.feed_page(self.events(after=after, wait=wait))
            yield from items

    # --- operational (§2.10) ---------------------------------------------------------------

    def health(self) -> HealthBody:
        return cast(HealthBody, self._do("health"))

    def readyz(self) -> ReadyzBody:
        return cast(ReadyzBody, self._do("readyz"))

    def readyz_tenant(self, tenant_id: str) -> ReadyzBody:
        return cast(ReadyzBody, self._do("readyz_tenant", path_id=tenant_id))

    def metrics(self) -> str:
        return cast(str, self._do("metrics"))

    def version(self) -> VersionBody:
        return cast(VersionBody, self._do("version"))


class AsyncFetcherClient(_Base):
    """Asynchronous client. Use as an async context manager, or call :meth:`aclose`."""

    def __init__(
        self,
        base_url: str,
        *,
        token: AsyncTokenSource | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        super().__init__(base_url, token, max_answer_bytes)
        self._http = httpx.AsyncClient(transport=transport, timeout=timeout)

    async def __aenter__(self) -> AsyncFetcherClient:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call) -> tuple[httpx.Response, Any]:
        token = self._token_value(call.route)
        if inspect.isawaitable(token):
            token = await token
        request = self._request(call, token)
        with _core.transport_errors():
            response = await self._http.send(request, stream=True)
            try:
                body = _core.BoundedBody(response, self.max_answer_bytes)
                async for chunk in response.aiter_bytes():
                    body.add(chunk)
            finally:
                await response.aclose()
        return response, _core.parse(call, response, body.content)

    async def _do(self, name: str, **kw: Any) -> Any:
        return (await self._send(_core.build(name, **kw)))[1]

    async def create_connection(
        self, connection: ConnectionCreate, *, product: str
    ) -> ConnectionResponse:
        headers = {"X-Product-Name": product}
        body = await self._do("create_connection", body=connection, headers=headers)
        return cast(ConnectionResponse, body)

    async def list_connections(
        self, *, product: str | None = None, **filters: Any
    ) -> ConnectionPage:
        query = _core.list_query(**_list_filters(filters))
        headers = {"X-Product-Name": product}
        return cast(
            ConnectionPage, await self._do("list_connections", query=query, headers=headers)
        )

    async def list_unassigned(self, **filters: Any) -> ConnectionPage:
        query = _core.list_query(**_list_filters(filters))
        return cast(ConnectionPage, await self._do("list_unassigned", query=query))

    async def get_connection(self, connection_id: str) -> ConnectionResponse:
        return cast(ConnectionResponse, await self._do("get_connection", path_id=connection_id))

    async def update_connection(
        self, connection_id: str, changes: ConnectionUpdate
    ) -> ConnectionResponse:
        body = await self._do("update_connection", path_id=connection_id, body=changes)
        return cast(ConnectionResponse, body)

    async def delete_connection(self, connection_id: str) -> None:
        await self._do("delete_connection", path_id=connection_id)

    async def test_connection(self, connection_id: str) -> TestResult:
        return cast(TestResult, await self._do("test_connection", path_id=connection_id))

    async def connection_schema(
        self, connection_id: str, *, schemas: list[str] | None = None
    ) -> SchemaResponse:
        query = {"schemas": ",".join(schemas) if schemas else None}
        body = await self._do("connection_schema", path_id=connection_id, query=query)
        return cast(SchemaResponse, body)

    async def validate_schema(self, mapped_fields: MappedFields) -> ValidateSchemaSuccess:
        body = await self._do("validate_schema", body={"mappedFields": mapped_fields})
        return cast(ValidateSchemaSuccess, body)

    async def assign_connection(self, connection_id: str, *, product: str) -> ConnectionResponse:
        headers = {"X-Product-Name": product}
        body = await self._do("assign_connection", path_id=connection_id, headers=headers)
        return cast(ConnectionResponse, body)

    async def submit(
        self,
        mapped_fields: Mapping[str, Mapping[str, list[str]]],
        *,
        metadata: Mapping[str, Any],
        filters: Mapping[str, Any] | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> Submission:
        body = _core.job_request(mapped_fields, metadata, filters, limits)
        response, parsed = await self._send(_core.build("submit", body=body))
        return _core.submission(response, parsed)

    async def get_job(self, job_id: str) -> Job:
        return _core.job(await self._do("get_job", path_id=job_id))

    async def cancel(self, job_id: str) -> Job:
        """As :meth:`FetcherClient.cancel`."""
        return _core.job(await self._do("cancel", path_id=job_id))

    async def retry(self, job_id: str) -> Submission:
        """As :meth:`FetcherClient.retry`."""
        response, parsed = await self._send(_core.build("retry", path_id=job_id))
        return _core.submission(response, parsed)

    async def list_jobs(self, *, product: str | None = None, **filters: Any) -> JobListPage:
        """One page of ``GET /v1/fetcher``; :attr:`jobs` iterates over every page."""
        return await self._job_page(job_query(**filters), product)

    async def _job_page(self, query: dict[str, object | None], product: str | None) -> JobListPage:
        headers = {"X-Product-Name": product}
        return JobListPage(await self._do("list_jobs", query=query, headers=headers))

    @property
    def jobs(self) -> AsyncJobs:
        """``async for job in client.jobs.list(status="failed")``."""
        return AsyncJobs(self._job_page)

    async def wait(
        self,
        job_id: str,
        *,
        timeout: float = 300.0,  # noqa: ASYNC109 - the same signature as FetcherClient.wait
        poll_interval: float = 0.25,
    ) -> Job:
        """As :meth:`FetcherClient.wait`."""
        loop = asyncio.get_running_loop()
        deadline, backoff = loop.time() + timeout, Backoff(poll_interval, 2.0)
        while True:
            job = await self.get_job(job_id)
            remaining = deadline - loop.time()
            if _core.settled(job_id, job, remaining):
                return job
            await asyncio.sleep(backoff(remaining))

    async def events(
        self,
        *,
        after: str | None = None,
        limit: int | None = None,
        type: str | None = None,
        wait: int | None = None,
    ) -> FeedPage:
        query = {"after": after, "limit": limit, "type": type, "wait": wait}
        return cast(FeedPage, await self._do("events", query=query))

    async def follow_events(self, *, after: str = "0", wait: int = 30) -> AsyncIterator[FeedItem]:
        while True:
            items, after = _core.feed_page(await self.events(after=after, wait=wait))
            for item in items:
                yield item

    async def health(self) -> HealthBody:
        return cast(HealthBody, await self._do("health"))

    async def readyz(self) -> ReadyzBody:
        return cast(ReadyzBody, await self._do("readyz"))

    async def readyz_tenant(self, tenant_id: str) -> ReadyzBody:
        return cast(ReadyzBody, await self._do("readyz_tenant", path_id=tenant_id))

    async def metrics(self) -> str:
        return cast(str, await self._do("metrics"))

    async def version(self) -> VersionBody:
        return cast(VersionBody, await self._do("version"))


_FILTER_NAMES = ("limit", "page", "sort_order", "type", "start_date", "end_date", "metadata")


def _list_filters(filters: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(filters) - set(_FILTER_NAMES)
    if unknown:
        raise TypeError(f"unknown list filters: {sorted(unknown)}")
    return {name: filters.get(name) for name in _FILTER_NAMES}


def _close_unawaited(value: object) -> None:
    """Close a coroutine the sync client cannot await (no "never awaited" warning)."""
    close = getattr(value, "close", None)
    if callable(close):
        close()
