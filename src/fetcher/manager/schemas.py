"""Pydantic models that describe the HTTP API in ``/openapi.json`` (contract §2, §3.1, §4.6).

They document; they do not parse. Routes build responses from the services, so these models
mirror the contract's response shapes, with omitted-when-empty members optional. Request bodies
and parameters are described by the hand-written JSON Schemas of :mod:`fetcher.manager.openapi`.
The helpers at the bottom build the ``openapi_extra`` and ``responses`` fragments each route
declares.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fetcher.services.shapes import ConnectionType

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

MetadataValue = str | int | float | bool | None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- errors (§2.2) ------------------------------------------------------------------------


class SchemaValidationEntry(_Strict):
    """One §2.6.9 inconsistency."""

    type: Literal["DATA_SOURCE_NOT_FOUND", "DATA_SOURCE_DOWN", "TABLE_NOT_FOUND", "FIELD_NOT_FOUND"]
    dataSourceId: str
    table: str | None = None
    field: str | None = None


class ErrorBody(_Strict):
    """§2.2: every non-2xx body. ``fields`` only for field-level validation errors; ``errors``
    only for FET-1060."""

    code: str = Field(pattern=r"^FET-\d{4}$", examples=["FET-0402"])
    title: str
    message: str
    fields: dict[str, str] | None = None
    errors: list[SchemaValidationEntry] | None = None


# --- connections (§2.5, §2.6) -------------------------------------------------------------


class SslResponse(_Strict):
    mode: str


class ConnectionResponse(_Strict):
    """§2.5 ConnectionResponse. Internal datasources omit host, port and timestamps."""

    id: str
    productName: str | None = None
    configName: str
    type: ConnectionType
    host: str | None = None
    port: int | None = None
    databaseName: str
    schema_: str | None = Field(default=None, alias="schema")
    userName: str | None = None
    ssl: SslResponse | None = None
    metadata: dict[str, MetadataValue] | None = None
    internal: bool
    createdAt: str | None = None
    updatedAt: str | None = None


class ConnectionPage(_Strict):
    """§2.6.2 page over the combined sequence."""

    items: list[ConnectionResponse]
    page: int
    limit: int
    total: int


class TestResult(_Strict):
    """§2.6.7: a connect failure is a ``200`` with ``status: failure``."""

    status: Literal["success", "failure"]
    message: str
    latencyMs: int = Field(ge=0)


class SchemaTable(_Strict):
    name: str
    fields: list[str]


class SchemaResponse(_Strict):
    """§2.6.8: table names are result keys, sorted; fields sorted by code point."""

    id: str
    configName: str
    databaseName: str
    type: ConnectionType
    tables: list[SchemaTable]


class ValidateSchemaSuccess(_Strict):
    status: Literal["success"]
    message: str


# --- jobs (§2.8, §3.1, §4.6) --------------------------------------------------------------


class JobAccepted(_Strict):
    """§2.8: 202 for a new job, 200 for a duplicate; ``Location: /v1/fetcher/<jobId>``."""

    jobId: str
    status: Literal["pending", "processing", "completed", "failed"]
    createdAt: str
    message: str


class JobResponse(_Strict):
    """§4.6 JobResponse."""

    id: str
    status: Literal["pending", "processing", "completed", "failed"]
    metadata: dict[str, MetadataValue] | None = None
    mappedFields: dict[str, dict[str, list[str]]]
    filters: dict[str, Any] | None = None
    limits: dict[str, int] | None = None
    resultPath: str | None = None
    resultHmac: str | None = None
    requestHash: str
    createdAt: str
    completedAt: str | None = None


# --- operational and feed (§2.10, §2.12) --------------------------------------------------


class HealthBody(_Strict):
    status: Literal["healthy", "unhealthy"]
    reason: str | None = None


class ReadyCheck(_Strict):
    status: Literal["up", "down", "skipped"]
    latency_ms: int | None = None
    error: str | None = None
    reason: str | None = None


class ReadyzBody(_Strict):
    status: Literal["healthy", "unhealthy"]
    checks: dict[str, ReadyCheck]
    version: str
    deployment_mode: str


class VersionBody(_Strict):
    version: str


class FeedItem(_Strict):
    cursor: str
    routingKey: Literal["job.completed", "job.failed"]
    headers: dict[str, str]
    data: dict[str, Any]
    createdAt: str
    publishedAt: str | None = None


class FeedPage(_Strict):
    items: list[FeedItem]
    next: str


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
