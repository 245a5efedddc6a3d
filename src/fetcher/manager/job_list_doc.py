"""The ``/openapi.json`` parameters of ``GET /v1/fetcher`` (issue 21), kept apart from
``fetcher.manager.openapi`` so the route's document is self-contained.

Each schema accepts exactly the texts :func:`fetcher.services.jobs.list_query.parse_job_list`
accepts, one parameter at a time (the ``createdTo`` ≥ ``createdFrom`` rule and a cursor's
signature are beyond a JSON Schema). ``FetcherAPI.openapi`` adds them with
:func:`add_job_list_parameters`.
"""

from __future__ import annotations

from typing import Any

from fetcher.manager.openapi import parameter, product_header_parameter
from fetcher.services.api.shapes import UUID_PATTERN
from fetcher.services.jobs.list_query import (
    CURSOR_PATTERN,
    DATE,
    DATE_TIME,
    JOB_STATUSES,
    STATUS_PATTERN,
    job_list_limit,
)

__all__ = [
    "JOB_LIST_DESCRIPTION",
    "JOB_LIST_PATH",
    "add_job_list_parameters",
    "job_list_parameters",
]

JOB_LIST_PATH = "/v1/fetcher"
JOB_LIST_DESCRIPTION = (
    "The caller's jobs, newest first (`createdAt`, then `id`), in pages that follow "
    "`nextCursor`. A product-restricted token sees only its products' jobs. Unknown, repeated "
    "and malformed parameters answer 400 with `fields` naming every one (FET-0405, FET-0406 "
    "for `limit`, FET-0408 for a date, FET-0409 when `createdTo` < `createdFrom`). "
    "`mappedFields`/`filters` over 4 KiB are left out of an item, `metadata` over 4 KiB is cut to "
    "`source` (the product) and `error`, and each is named in `truncated`."
)
_EMPTY = {"type": "string", "maxLength": 0}


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return parameter(name, "query", description, schema=schema)


def _moment(name: str, rule: str) -> dict[str, Any]:
    schema = {
        "anyOf": [
            _EMPTY,
            {"type": "string", "format": "date", "pattern": f"^{DATE}$"},
            {"type": "string", "format": "date-time", "pattern": f"^{DATE_TIME}$"},
        ]
    }
    return _query(name, f"`YYYY-MM-DD` (UTC) or an RFC 3339 date-time: {rule}.", schema)


def job_list_parameters(max_limit: int) -> list[dict[str, Any]]:
    """``X-Product-Name`` and the query parameters, in check order."""
    limit = job_list_limit(max_limit)
    states = ", ".join(f"`{s}`" for s in JOB_STATUSES)
    return [
        product_header_parameter(required=False),
        _query(
            "status",
            f"One or more of {states}, comma-separated.",
            {"type": "string", "pattern": f"^(?:{STATUS_PATTERN})?$"},
        ),
        _query(
            "connectionId",
            "Jobs that used this connection (stored or internal).",
            {"type": "string", "pattern": f"^(?:{UUID_PATTERN})?$"},
        ),
        _moment("createdFrom", "createdAt ≥ that day's start or that instant"),
        _moment("createdTo", "createdAt ≤ that day's end or that instant"),
        _query("limit", limit.description, limit.schema),
        _query(
            "cursor",
            "The previous page's `nextCursor`, under the same filters.",
            {"type": "string", "pattern": f"^(?:{CURSOR_PATTERN})?$"},
        ),
    ]


def add_job_list_parameters(document: dict[str, Any], max_limit: int) -> None:
    """Publish the parameters, ``limit`` with the configured ``MAX_PAGINATION_LIMIT``, on the
    generated document (in place).

    They are added after FastAPI built the document rather than declared on the route: an
    operation with parameters makes FastAPI keep its path item as a plain dict, which would
    change the key order of ``POST /v1/fetcher``'s document that shares the path.
    """
    document["paths"][JOB_LIST_PATH]["get"]["parameters"] = job_list_parameters(max_limit)
