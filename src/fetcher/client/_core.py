"""What the sync and async clients share: the route table, request building and answer
parsing. The two client classes only send; every rule lives here once."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from fetcher.client.errors import (
    InvalidAnswerError,
    TransportError,
    WaitTimeoutError,
    error_from_response,
)
from fetcher.client.objects import Job, Submission

__all__ = ["ROUTES", "Call", "Route", "Submission", "build", "parse"]

CONNECTIONS = "/v1/management/connections"
LIST_PARAMS = ("limit", "page", "sortOrder", "type", "startDate", "endDate")
# The §12.3 scopes (``fetcher:admin`` also grants each).
CONN_READ, CONN_WRITE = "fetcher:connections:read", "fetcher:connections:write"
JOBS_READ, JOBS_WRITE = "fetcher:jobs:read", "fetcher:jobs:write"
EVENTS_READ = "fetcher:events:read"
RESULTS_READ = "fetcher:results:read"
TERMINAL = frozenset({"completed", "failed", "canceled"})


@dataclass(frozen=True, slots=True)
class Route:
    """One Manager route: its method and path template, the parameters the client sends
    (path, query and header names as in OpenAPI), the schema names of its request body and
    success bodies, and the §12.3 scope a token needs for it (None: an operational route,
    open in every mode, sent without the token)."""

    method: str
    path: str
    params: tuple[str, ...] = ()
    request: str | None = None
    responses: tuple[str, ...] = ()
    ok: tuple[int, ...] = (200,)
    scope: str | None = None


ROUTES: dict[str, Route] = {
    "create_connection": Route(
        "POST",
        CONNECTIONS,
        ("X-Product-Name",),
        "ConnectionCreate",
        ("ConnectionResponse",),
        (201,),
        CONN_WRITE,
    ),
    "list_connections": Route(
        "GET",
        CONNECTIONS,
        ("X-Product-Name", *LIST_PARAMS),
        None,
        ("ConnectionPage",),
        scope=CONN_READ,
    ),
    "list_unassigned": Route(
        "GET",
        f"{CONNECTIONS}/unassigned",
        LIST_PARAMS,
        None,
        ("ConnectionPage",),
        scope=CONN_READ,
    ),
    "validate_schema": Route(
        "POST",
        f"{CONNECTIONS}/validate-schema",
        (),
        "ValidateSchemaRequest",
        ("ValidateSchemaSuccess",),
        scope=CONN_READ,
    ),
    "get_connection": Route(
        "GET", f"{CONNECTIONS}/{{id}}", ("id",), None, ("ConnectionResponse",), scope=CONN_READ
    ),
    "update_connection": Route(
        "PATCH",
        f"{CONNECTIONS}/{{id}}",
        ("id",),
        "ConnectionUpdate",
        ("ConnectionResponse",),
        scope=CONN_WRITE,
    ),
    "delete_connection": Route(
        "DELETE", f"{CONNECTIONS}/{{id}}", ("id",), ok=(204,), scope=CONN_WRITE
    ),
    "test_connection": Route(
        "POST", f"{CONNECTIONS}/{{id}}/test", ("id",), None, ("TestResult",), scope=CONN_READ
    ),
    "connection_schema": Route(
        "GET",
        f"{CONNECTIONS}/{{id}}/schema",
        ("id", "schemas"),
        None,
        ("SchemaResponse",),
        scope=CONN_READ,
    ),
    "assign_connection": Route(
        "POST",
        f"{CONNECTIONS}/{{id}}/assign",
        ("id", "X-Product-Name"),
        None,
        ("ConnectionResponse",),
        scope=CONN_WRITE,
    ),
    "submit": Route(
        "POST", "/v1/fetcher", (), "JobRequest", ("JobAccepted",), (200, 202), JOBS_WRITE
    ),
    "get_job": Route("GET", "/v1/fetcher/{id}", ("id",), None, ("JobResponse",), scope=JOBS_READ),
    # §14.4: 200 with the canceled job; 409 FET-1104 when it is already terminal.
    "cancel": Route(
        "POST", "/v1/fetcher/{id}/cancel", ("id",), None, ("JobResponse",), scope=JOBS_WRITE
    ),
    # §14.5: answered as submit; 409 FET-1105 unless the job is failed or canceled.
    "retry": Route(
        "POST", "/v1/fetcher/{id}/retry", ("id",), None, ("JobAccepted",), (200, 202), JOBS_WRITE
    ),
    "list_jobs": Route(
        "GET",
        "/v1/fetcher",
        ("X-Product-Name", "status", "connectionId", "createdFrom", "createdTo", "limit", "cursor"),
        None,
        ("JobPage",),
        scope=JOBS_READ,
    ),
    # §14.2: the body is the stored object (octets), streamed by ResultDownload.
    "download_result": Route(
        "GET",
        "/v1/fetcher/{id}/result",
        ("id", "Range", "If-Range", "If-None-Match"),
        None,
        (),
        (200, 206),
        RESULTS_READ,
    ),
    "events": Route(
        "GET",
        "/v1/events",
        ("after", "limit", "type", "wait"),
        None,
        ("FeedPage",),
        scope=EVENTS_READ,
    ),
    "health": Route("GET", "/health", (), None, ("HealthBody",), (200, 503)),
    "readyz": Route("GET", "/readyz", (), None, ("ReadyzBody",), (200, 503)),
    # /openapi.json gives this route's 200 no schema; the body is ReadyzBody plus "tenant".
    "readyz_tenant": Route("GET", "/readyz/tenant/{id}", ("id",), None, (), (200, 503)),
    "metrics": Route("GET", "/metrics"),
    "version": Route("GET", "/version", (), None, ("VersionBody",)),
}
"""Client method name → route. Unit tests check it against ``/openapi.json`` (with
``AUTH_MODE=jwt`` for the scopes)."""


@dataclass(frozen=True, slots=True)
class Call:
    route: Route
    url: str
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None


def _clean(query: Mapping[str, object | None]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in query.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def build(
    name: str,
    *,
    path_id: str | None = None,
    query: Mapping[str, object | None] | None = None,
    headers: Mapping[str, str | None] | None = None,
    body: Any = None,
) -> Call:
    """The request for client method ``name``. JSON bodies are compact UTF-8 and always sent
    with ``Content-Type: application/json`` (§2.1: a body-reading route needs it)."""
    route = ROUTES[name]
    url = route.path
    if "{id}" in url:
        if not path_id:
            raise ValueError(f"{name} needs an id")
        url = url.replace("{id}", quote(str(path_id), safe=""))
    sent = {k: v for k, v in (headers or {}).items() if v is not None}
    data: bytes | None = None
    if route.request is not None:
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        sent["Content-Type"] = "application/json"
        data = text.encode("utf-8")
    return Call(route, url, _clean(query or {}), sent, data)


def parse(call: Call, response: httpx.Response, content: bytes) -> Any:
    """The body of a success answer (``content``, read within the client's bound), or the
    typed :class:`ApiError` raised; a success body that is not JSON where the answer says
    it is raises :class:`InvalidAnswerError`."""
    if response.status_code not in call.route.ok:
        try:
            body = json.loads(content)
        except (ValueError, RecursionError):
            body = None
        raise error_from_response(response.status_code, body, dict(response.headers))
    if response.status_code == 204:
        return None
    if response.headers.get("content-type", "").startswith("application/json"):
        try:
            return json.loads(content)
        except (ValueError, RecursionError):
            raise InvalidAnswerError(f"the answer of {call.route.path} is not JSON") from None
    return content.decode(response.encoding or "utf-8", "replace")


#: The §2.12 cursor form (``after`` and ``next``).
_CURSOR = re.compile(r"[0-9]{1,18}")


def feed_page(page: Any) -> tuple[list[Any], str]:
    """The items and the ``next`` cursor of a §2.12 page, or :class:`InvalidAnswerError`
    when the page is not an object with an ``items`` list of objects and a cursor ``next``."""
    if not isinstance(page, dict) or not isinstance(page.get("items"), list):
        raise InvalidAnswerError("the event feed answered a page without an items list")
    items, cursor = page["items"], page.get("next")
    if not isinstance(cursor, str) or _CURSOR.fullmatch(cursor) is None:
        raise InvalidAnswerError("the event feed answered a next cursor that is not 1-18 digits")
    if not all(isinstance(item, dict) for item in items):
        raise InvalidAnswerError("the event feed answered an item that is not an object")
    return items, cursor


class BoundedBody:
    """An answer body read chunk by chunk that refuses to grow past ``limit`` bytes (after
    content decoding, so a compressed bomb stops too): :class:`InvalidAnswerError` as soon as
    the ``Content-Length`` or the bytes received go over, so memory stays near ``limit``."""

    def __init__(self, response: httpx.Response, limit: int) -> None:
        self._limit = limit
        self._data = bytearray()
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            raise self._too_large()

    def add(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > self._limit:
            raise self._too_large()

    @property
    def content(self) -> bytes:
        return bytes(self._data)

    def _too_large(self) -> InvalidAnswerError:
        return InvalidAnswerError(
            f"the server's answer exceeds {self._limit} bytes (the read stopped there)"
        )


def submission(response: httpx.Response, body: Any) -> Submission:
    if not isinstance(body, dict):
        raise InvalidAnswerError("the answer of POST /v1/fetcher is not a JSON object")
    return Submission(
        body, duplicate=response.status_code == 200, location=response.headers.get("location")
    )


def job(body: Any) -> Job:
    """The :class:`Job` of a ``GET /v1/fetcher/{id}`` answer (InvalidAnswerError when it is
    not a job object)."""
    return Job(body)


def job_request(
    mapped_fields: Mapping[str, Mapping[str, list[str]]],
    metadata: Mapping[str, Any],
    filters: Mapping[str, Any] | None,
    limits: Mapping[str, int] | None,
) -> dict[str, Any]:
    """The §3.1 body; ``filters`` and ``limits`` only when given."""
    data_request: dict[str, Any] = {"mappedFields": mapped_fields}
    if filters:
        data_request["filters"] = filters
    if limits:
        data_request["limits"] = limits
    return {"dataRequest": data_request, "metadata": dict(metadata)}


def list_query(
    *,
    limit: int | None,
    page: int | None,
    sort_order: str | None,
    type: str | None,
    start_date: str | None,
    end_date: str | None,
    metadata: Mapping[str, str] | None,
) -> dict[str, object | None]:
    query: dict[str, object | None] = {
        "limit": limit,
        "page": page,
        "sortOrder": sort_order,
        "type": type,
        "startDate": start_date,
        "endDate": end_date,
    }
    for key, value in (metadata or {}).items():
        query[f"metadata.{key}"] = value
    return query


#: RFC 6750 ``b64token``: what a bearer credential may contain.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def checked_token(token: object) -> str:
    """``token`` when it is a usable bearer credential; otherwise a ValueError or TypeError
    whose message never contains it (§9.2: secrets stay out of errors)."""
    if not isinstance(token, str):
        raise TypeError(f"a bearer token must be a str, not {type(token).__name__}")
    if _B64TOKEN.fullmatch(token) is None:
        raise ValueError("the bearer token is empty or has characters a token cannot contain")
    return token


def auth_headers(route: Route, token: str | None) -> dict[str, str]:
    """``Authorization: Bearer <token>`` for a business route (§12.1); operational routes
    (§2.10) are open and never get it."""
    if token is None or route.scope is None:
        return {}
    return {"Authorization": f"Bearer {token}"}


@contextmanager
def transport_errors() -> Iterator[None]:
    """An httpx failure to get an answer (connect, read, TLS) as :class:`TransportError`."""
    try:
        yield
    except httpx.HTTPError as exc:
        raise TransportError(f"{type(exc).__name__}: no answer from the Manager") from None


def settled(job_id: str, job: Job, remaining: float) -> bool:
    """One poll of wait(): True when ``job`` is ``completed`` or ``failed``; with no time
    ``remaining``, ``WaitTimeoutError``; else False (poll again)."""
    if job.status in TERMINAL:
        return True
    if remaining <= 0:
        raise WaitTimeoutError(job_id, job)
    return False


class Backoff:
    """Poll intervals for wait(): ``first`` doubling up to ``cap`` seconds."""

    def __init__(self, first: float, cap: float) -> None:
        self._next = first
        self._cap = cap

    def __call__(self, remaining: float) -> float:
        delay = min(self._next, self._cap, max(remaining, 0.0))
        self._next = min(self._next * 2, self._cap)
        return delay
