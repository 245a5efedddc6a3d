"""What routes parse before they call a service (contract §2.1, §2.4, §2.6.2, §2.12).

Path IDs, integer query parameters, the list-route and event-feed query parameters, the
``X-Product-Name`` header and JSON bodies. Each function raises the §2.3 ``ApiError`` of its
rule; routes stay thin. ``RuntimeDep`` hands a route the typed :class:`Runtime`.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Literal, cast

from fastapi import Depends, Request
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException as StarletteHTTPException

from fetcher.bootstrap import Runtime
from fetcher.manager.json_body import check_media_type, parse_json_object
from fetcher.services.connection_validation import validate_product_header
from fetcher.services.connections import ListRequest
from fetcher.services.errors import ApiError
from fetcher.services.feed import DEFAULT_FEED_LIMIT, MAX_FEED_LIMIT, MAX_FEED_WAIT
from fetcher.services.log_context import bind_log_context
from fetcher.services.records import EventType
from fetcher.services.shapes import (
    FEED_CURSOR_PATTERN,
    MAX_METADATA_FILTER_VALUE,
    MAX_METADATA_KEY,
    QUERY_INT_DIGITS,
    UUID_PATTERN,
)

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

_UUID = re.compile(UUID_PATTERN)
_QUERY_INT = re.compile(f"[0-9]{{1,{QUERY_INT_DIGITS}}}")
_FEED_CURSOR = re.compile(FEED_CURSOR_PATTERN)
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_MAX_PAGE_PRODUCT = 2**31
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


# --- query parameters ---------------------------------------------------------------------


def _bad_query(message: str) -> ApiError:
    return ApiError("FET-0405", message)


def _present(params: QueryParams, name: str) -> str | None:
    """§2.6.2: unknown parameters are ignored and empty values are treated as absent."""
    value = params.get(name)
    return value if value else None


def _query_int(params: QueryParams, name: str, default: int) -> int:
    raw = _present(params, name)
    if raw is None:
        return default
    if _QUERY_INT.fullmatch(raw) is None or int(raw) < 1:
        raise _bad_query(f"{name} must be a positive integer")
    return int(raw)


def _query_date(params: QueryParams, name: str) -> date | None:
    raw = _present(params, name)
    if raw is None:
        return None
    match = _DATE.fullmatch(raw)
    try:
        if match is None:
            raise ValueError(raw)
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        raise ApiError("FET-0408", f"{name} must be a date in the format YYYY-MM-DD") from None


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def _metadata_filters(params: QueryParams) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name, value in params.multi_items():
        if not name.startswith("metadata.") or not value:
            continue
        key = name.removeprefix("metadata.")
        if not 1 <= len(key) <= MAX_METADATA_KEY or len(value) > MAX_METADATA_FILTER_VALUE:
            raise _bad_query(
                f"metadata filter keys are 1-{MAX_METADATA_KEY} and values at most "
                f"{MAX_METADATA_FILTER_VALUE} characters"
            )
        pairs.append((key, value))
    return pairs


def parse_list_request(params: QueryParams, *, max_limit: int) -> ListRequest:
    """§2.6.2 list parameters: FET-0405 to FET-0409 in parameter order."""
    limit = _query_int(params, "limit", 10)
    if limit > max_limit:
        raise ApiError(
            "FET-0406",
            f"The pagination limit exceeds the maximum allowed of {max_limit} items per page. "
            "Please verify the limit and try again.",
        )
    page = _query_int(params, "page", 1)
    if page * limit > _MAX_PAGE_PRODUCT:
        raise _bad_query("page × limit must not exceed 2^31")
    sort = (_present(params, "sortOrder") or "desc").lower()
    if sort not in ("asc", "desc"):
        raise ApiError("FET-0407", "sortOrder must be asc or desc")
    start = _query_date(params, "startDate")
    end = _query_date(params, "endDate")
    if start is not None and end is not None and end < start:
        raise ApiError("FET-0409", "endDate must not be before startDate")
    return ListRequest(
        page=page,
        limit=limit,
        sort=cast(Literal["asc", "desc"], sort),
        type=_present(params, "type"),
        created_from=_midnight(start) if start is not None else None,
        created_before=_midnight(end) + timedelta(days=1) if end is not None else None,
        metadata=_metadata_filters(params),
    )


class FeedQuery:
    """§2.12 parameters, validated."""

    __slots__ = ("after", "event_type", "limit", "wait")

    def __init__(
        self, after: int | None, limit: int, event_type: EventType | None, wait: int
    ) -> None:
        self.after = after
        self.limit = limit
        self.event_type = event_type
        self.wait = wait


def parse_feed_query(params: QueryParams) -> FeedQuery:
    """§2.12: ``after`` ``^[0-9]{1,18}$``; ``limit`` 1..1000 (> 1000 → FET-0406); ``type``
    ``completed|failed``; ``wait`` 0..30. Anything else → ``400 FET-0405``."""
    after_raw = params.get("after")
    if after_raw is not None and _FEED_CURSOR.fullmatch(after_raw) is None:
        raise _bad_query("after must be a feed cursor")
    limit_raw = params.get("limit")
    if limit_raw is not None and (_QUERY_INT.fullmatch(limit_raw) is None or int(limit_raw) < 1):
        raise _bad_query("limit must be a positive integer")
    limit = int(limit_raw) if limit_raw is not None else DEFAULT_FEED_LIMIT
    if limit > MAX_FEED_LIMIT:
        raise ApiError(
            "FET-0406",
            f"The pagination limit exceeds the maximum allowed of {MAX_FEED_LIMIT} items per "
            "page. Please verify the limit and try again.",
        )
    kind = params.get("type")
    if kind is not None and kind not in ("completed", "failed"):
        raise _bad_query("type must be completed or failed")
    wait_raw = params.get("wait")
    if wait_raw is not None and (
        _QUERY_INT.fullmatch(wait_raw) is None or int(wait_raw) > MAX_FEED_WAIT
    ):
        raise _bad_query(f"wait must be an integer from 0 to {MAX_FEED_WAIT}")
    return FeedQuery(
        after=int(after_raw) if after_raw is not None else None,
        limit=limit,
        event_type=cast(EventType | None, kind),
        wait=int(wait_raw) if wait_raw is not None else 0,
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
