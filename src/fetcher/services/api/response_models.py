"""The response shapes of the HTTP API (contract §2.2, §2.5, §2.6, §2.8, §2.10, §2.12, §4.6).

One pydantic model per response body, declared once: :func:`shape` builds a response from its
model (members left out are omitted, as the contract's omitted-when-empty members are), and
``/openapi.json`` publishes the same models (the routes name them in their ``responses``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fetcher.services.api.shapes import ConnectionType
from fetcher.services.records import JobStatus

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
    #: §12.4: the token ``sub`` that created it; absent with ``AUTH_MODE=none``.
    createdBy: str | None = None
    #: In a list page only (issue 33): ``["metadata"]`` when the connection's metadata is over
    #: 4 KiB and was left out; ``GET /v1/management/connections/{id}`` returns it whole.
    truncated: list[Literal["metadata"]] | None = None


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
    #: Each field's type as the source names it (``integer``, ``timestamptz``, ``objectId``),
    #: or its §5.3 family where the source names none; informative (issue 33: the console's
    #: schema browser shows it).
    types: dict[str, str]


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
    status: JobStatus
    createdAt: str
    message: str


class JobResult(_Strict):
    """§14.1 result summary of a completed job. Members other than ``path`` and the two
    retention members are absent when the job was completed before they were recorded;
    ``tables`` is absent in list items. ``expiresAt``/``expiredAt`` are always present, and
    ``null`` until retention sets them."""

    path: str
    sizeBytes: int | None = None
    plaintextBytes: int | None = None
    rowCount: int | None = None
    tables: dict[str, dict[str, int]] | None = None
    hmac: str | None = None
    keyVersion: str | None = None
    expiresAt: str | None
    expiredAt: str | None


class JobResponse(_Strict):
    """§4.6 JobResponse (with §14.1 ``result``)."""

    id: str
    status: JobStatus
    metadata: dict[str, MetadataValue] | None = None
    mappedFields: dict[str, dict[str, list[str]]]
    filters: dict[str, Any] | None = None
    limits: dict[str, int] | None = None
    resultPath: str | None = None
    resultHmac: str | None = None
    requestHash: str
    createdAt: str
    completedAt: str | None = None
    #: §12.4: the token ``sub`` that created it; absent with ``AUTH_MODE=none``.
    createdBy: str | None = None
    #: §14.1: only when ``completed``.
    result: JobResult | None = None
    #: §15.3: the W3C trace ID of the request that created it; ``null`` when not traced.
    traceId: str | None = Field(
        pattern="^[0-9a-f]{32}$",
        description="The W3C trace ID of the request that created the job; null when it "
        "was not traced (tracing off, or not sampled).",
    )
    #: §14.5: the failed or canceled job this one retries; absent otherwise.
    retryOf: str | None = Field(
        default=None, description="The failed or canceled job this job retries (§14.5)."
    )


# --- operational and feed (§2.10, §2.12) --------------------------------------------------


Health = Literal["healthy", "unhealthy"]


class HealthBody(_Strict):
    status: Health
    reason: str | None = None


class ReadyCheck(_Strict):
    status: Literal["up", "down", "skipped"]
    latency_ms: int | None = None
    error: str | None = None
    reason: str | None = None


class ReadyzBody(_Strict):
    status: Health
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


def shape(
    model: type[BaseModel], values: Mapping[str, object], *, keep_null: Collection[str] = ()
) -> dict[str, Any]:
    """The body of ``model`` from ``values`` (keys as on the wire): ``None`` members are left
    out (except those named in ``keep_null``, sent as ``null``), the rest checked against the
    model and returned in its declared order."""
    present = {key: value for key, value in values.items() if value is not None or key in keep_null}
    return model.model_validate(present).model_dump(by_alias=True, exclude_unset=True)
