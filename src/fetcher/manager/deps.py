"""What routes parse before they call a service (contract §2.1, §2.4, §2.6.2, §2.12).

Path IDs, integer query parameters, the list-route and event-feed query parameters, the
``X-Product-Name`` header and JSON bodies. Each function raises the §2.3 ``ApiError`` of its
rule; routes stay thin. ``RuntimeDep`` hands a route the typed :class:`Runtime`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, cast

from fastapi import Depends, Request
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException as StarletteHTTPException

from fetcher.bootstrap import Runtime
from fetcher.manager.json_body import check_media_type, parse_json_object
from fetcher.services.api import shapes
from fetcher.services.connections.catalog import ListRequest
from fetcher.services.connections.validation import validate_product_header
from fetcher.services.errors import ApiError
from fetcher.services.log_context import bind_log_context
from fetcher.services.records import EventType

__all__ = [
    "FeedQuery",
    "RuntimeDep",
    "STATIC_CONNECTION_PATHS",
    "get_runtime",
    "parse_connection_id",
    "parse_feed_query",
    "parse_job_id",
    "parse_list_request",
    "product_header",
    "read_json_object",
    "request_id",
]

_UUID = re.compile(shapes.UUID_PATTERN)
#: §2.6: static paths that take precedence over ``{id}`` (another method there is a 405).
STATIC_CONNECTION_PATHS = frozenset({"unassigned", "validate-schema"})


def get_runtime(request: Request) -> Runtime:
    """The runtime that ``create_app`` stored on the application."""
    return cast(Runtime, request.app.state.runtime)


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def request_id(request: Request) -> str:
    """The §2.1 request ID the middleware chose for this request."""
    return str(request.scope.get("state", {}).get("request_id", ""))


# --- path IDs (§2.1) ----------------------------------------------------------------------


def _parse_id(raw: str, message: str) -> str:
    if _UUID.fullmatch(raw) is None:
        raise ApiError("FET-0404", message)
    return raw.lower()


def parse_connection_id(raw: str, *, static_first: bool = False) -> str:
    """A canonical UUID in any case → lower-case, else ``400 FET-0404 invalid connection id``.

    With ``static_first``, ``unassigned`` and ``validate-schema`` are the static paths of §2.6:
    another method on them is ``405 FET-0008``, not an ID error.
    """
    if static_first and raw in STATIC_CONNECTION_PATHS:
        raise StarletteHTTPException(status_code=405)
    connection_id = _parse_id(raw, "invalid connection id")
    bind_log_context(connection_id=connection_id)  # every later line of the request names it
    return connection_id


def parse_job_id(raw: str) -> str:
    """A canonical UUID in any case → lower-case, else ``400 FET-0404 invalid job id``."""
    job_id = _parse_id(raw, "invalid job id")
    bind_log_context(job_id=job_id)  # every later line of the request names it
    return job_id


# --- query parameters (declared in fetcher.services.api.shapes) --------------------------------


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def parse_list_request(params: QueryParams, *, max_limit: int) -> ListRequest:
    """§2.6.2 list parameters: FET-0405 to FET-0409 in parameter order."""
    limit = shapes.list_limit(max_limit).read(params)
    page = shapes.PAGE.read(params)
    if page * limit > 2**shapes.PAGE_PRODUCT_EXPONENT:
        raise ApiError("FET-0405", f"page × limit must not exceed 2^{shapes.PAGE_PRODUCT_EXPONENT}")
    sort = shapes.SORT_ORDER.read(params)
    start = shapes.START_DATE.read(params)
    end = shapes.END_DATE.read(params)
    if start is not None and end is not None and end < start:
        raise ApiError("FET-0409", "endDate must not be before startDate")
    return ListRequest(
        page=page,
        limit=limit,
        sort=sort,
        type=shapes.LIST_TYPE.read(params),
        created_from=_midnight(start) if start is not None else None,
        created_before=_midnight(end) + timedelta(days=1) if end is not None else None,
        metadata=shapes.metadata_filters(params.multi_items()),
    )


@dataclass(frozen=True, slots=True)
class FeedQuery:
    """§2.12 parameters, validated."""

    after: int | None
    limit: int
    event_type: EventType | None
    wait: int


def parse_feed_query(params: QueryParams) -> FeedQuery:
    """§2.12 ``after``, ``limit``, ``type`` and ``wait``, checked in that order."""
    return FeedQuery(
        after=shapes.FEED_AFTER.read(params),
        limit=shapes.FEED_LIMIT.read(params),
        event_type=shapes.FEED_TYPE.read(params),
        wait=shapes.FEED_WAIT.read(params),
    )


# --- headers and bodies -------------------------------------------------------------------


def product_header(request: Request, *, required: bool) -> str | None:
    """§2.4 ``X-Product-Name``, trimmed and lower-cased; FET-0403 on a violation. A valid
    product is bound to the request's log context (``product``)."""
    product = validate_product_header(request.headers.get("x-product-name"), required=required)
    if product is not None:
        bind_log_context(product=product)
    return product


async def read_json_object(request: Request) -> dict[str, object]:
    """§2.1 in order: the size limit (enforced by the middleware while streaming, FET-0007),
    the media type (FET-0009), then strict JSON-object parsing (FET-0001)."""
    body = await request.body()
    check_media_type(request.headers.get("content-type"))
    return parse_json_object(body)
