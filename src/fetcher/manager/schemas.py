"""The OpenAPI fragments each route declares (contract §2, §3.1, §4.6).

The response models are those the services build their bodies from
(:mod:`fetcher.services.responses`, re-exported here for the routes); request bodies and
parameters come from :mod:`fetcher.manager.openapi`. The helpers build the ``openapi_extra``
and ``responses`` fragments.
"""

from __future__ import annotations

from typing import Any, Literal

from fetcher.services.responses import (
    ConnectionPage,
    ConnectionResponse,
    ErrorBody,
    FeedPage,
    HealthBody,
    JobAccepted,
    JobResponse,
    ReadyzBody,
    SchemaResponse,
    TestResult,
    ValidateSchemaSuccess,
    VersionBody,
)

__all__ = [
    "ConnectionPage",
    "ConnectionResponse",
    "ErrorBody",
    "FeedPage",
    "HealthBody",
    "JobAccepted",
    "JobResponse",
    "ReadyzBody",
    "SchemaResponse",
    "TestResult",
    "ValidateSchemaSuccess",
    "VersionBody",
    "error_responses",
    "json_request_body",
    "parameter",
]


_ERROR_TEXT = {
    400: "Validation error (FET-0001, FET-04xx, FET-10xx)",
    404: "Not found (FET-1001 entity, FET-0005 route)",
    405: "Method not allowed (FET-0008), with an Allow header",
    409: "Conflict (FET-0004, FET-1002, FET-1015, FET-1021)",
    413: "Payload too large (FET-0007)",
    415: "Unsupported media type (FET-0009)",
    422: "Schema validation failed (FET-1060)",
    429: "Too many requests (FET-0006), with a Retry-After header",
    500: "Internal server error (FET-0002)",
    502: "Datasource error (FET-1041, FET-1042)",
    503: "Service unavailable (FET-0003)",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries with the §2.2 body for ``statuses`` plus 500 and 503."""
    codes = sorted({*statuses, 500, 503})
    return {s: {"model": ErrorBody, "description": _ERROR_TEXT[s]} for s in codes}


def json_request_body(component: str, *, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` for a JSON body parsed by the route itself (§2.1); ``component`` is a
    ``components.schemas`` entry of :func:`fetcher.manager.openapi.request_components`."""
    ref = {"$ref": f"#/components/schemas/{component}"}
    content = {"application/json": {"schema": ref}}
    return {"requestBody": {"required": required, "content": content}}


def parameter(
    name: str,
    where: Literal["path", "query", "header"],
    description: str,
    *,
    required: bool = False,
    schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One OpenAPI parameter object (routes read their parameters themselves)."""
    return {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "description": description,
        "schema": schema or {"type": "string"},
    }
