"""The Manager API's JSON shapes as TypedDicts (CONTRACT §2, §4.6, §2.12), one per schema of
``/openapi.json`` with the same name and keys (a test keeps them in step)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "SCHEMAS",
    "ConnectionCreate",
    "ConnectionPage",
    "ConnectionResponse",
    "ConnectionUpdate",
    "ErrorBody",
    "FeedItem",
    "FeedPage",
    "HealthBody",
    "JobAccepted",
    "JobListItem",
    "JobPage",
    "JobRequest",
    "JobResponse",
    "JobResult",
    "JobStatus",
    "ReadyCheck",
    "ReadyzBody",
    "SchemaResponse",
    "SchemaTable",
    "SchemaValidationEntry",
    "SslInput",
    "SslResponse",
    "TestResult",
    "ValidateSchemaRequest",
    "ValidateSchemaSuccess",
    "VersionBody",
]

JobStatus = Literal["pending", "processing", "completed", "failed", "canceled"]
MappedFields = dict[str, dict[str, list[str]]]


class SslInput(TypedDict, total=False):
    mode: str
    ca: str
    cert: str
    key: str


class ConnectionCreate(TypedDict):
    """§2.5 input (create). ``host``/``port``/``userName``/``password`` are absent for SQLITE."""

    configName: str
    type: str
    databaseName: str
    host: NotRequired[str]
    port: NotRequired[int]
    schema: NotRequired[str]
    userName: NotRequired[str]
    password: NotRequired[str]
    ssl: NotRequired[SslInput | None]
    metadata: NotRequired[dict[str, str | int | float | bool | None]]


class ConnectionUpdate(TypedDict, total=False):
    """§2.5 input (PATCH, merge semantics; ``None`` clears ``schema``, ``ssl``, ``metadata``)."""

    configName: str
    type: str
    host: str
    port: int
    databaseName: str
    schema: str | None
    userName: str | None
    password: str | None
    ssl: SslInput | None
    metadata: dict[str, str | int | float | bool | None] | None


class SslResponse(TypedDict):
    mode: str


class ConnectionResponse(TypedDict):
    id: str
    configName: str
    type: str
    databaseName: str
    internal: bool
    productName: NotRequired[str]
    host: NotRequired[str]
    port: NotRequired[int]
    schema: NotRequired[str]
    userName: NotRequired[str]
    ssl: NotRequired[SslResponse]
    metadata: NotRequired[dict[str, Any]]
    createdAt: NotRequired[str]
    updatedAt: NotRequired[str]
    createdBy: NotRequired[str]
    #: In a list page only: ``["metadata"]`` when metadata over 4 KiB was left out.
    truncated: NotRequired[list[str]]


class ConnectionPage(TypedDict):
    items: list[ConnectionResponse]
    page: int
    limit: int
    total: int


class TestResult(TypedDict):
    status: Literal["success", "failure"]
    message: str
    latencyMs: int


class SchemaTable(TypedDict):
    name: str
    fields: list[str]
    types: dict[str, str]


class SchemaResponse(TypedDict):
    id: str
    configName: str
    databaseName: str
    type: str
    tables: list[SchemaTable]


class ValidateSchemaRequest(TypedDict):
    mappedFields: MappedFields


class ValidateSchemaSuccess(TypedDict):
    status: str
    message: str


class SchemaValidationEntry(TypedDict):
    type: str
    dataSourceId: str
    table: NotRequired[str]
    field: NotRequired[str]


class ErrorBody(TypedDict):
    code: str
    title: str
    message: str
    fields: NotRequired[dict[str, str]]
    errors: NotRequired[list[SchemaValidationEntry]]


class JobRequest(TypedDict):
    dataRequest: dict[str, Any]
    metadata: dict[str, Any]


class JobAccepted(TypedDict):
    jobId: str
    status: JobStatus
    createdAt: str
    message: str


class JobResult(TypedDict):
    """§14.1 result summary of a completed job (``tables`` only on the job itself)."""

    path: str
    expiresAt: str | None
    expiredAt: str | None
    sizeBytes: NotRequired[int]
    plaintextBytes: NotRequired[int]
    rowCount: NotRequired[int]
    tables: NotRequired[dict[str, dict[str, int]]]
    hmac: NotRequired[str]
    keyVersion: NotRequired[str]


class JobResponse(TypedDict):
    id: str
    status: JobStatus
    mappedFields: MappedFields
    requestHash: str
    createdAt: str
    metadata: NotRequired[dict[str, Any]]
    filters: NotRequired[dict[str, Any]]
    limits: NotRequired[dict[str, int]]
    resultPath: NotRequired[str]
    resultHmac: NotRequired[str]
    completedAt: NotRequired[str]
    createdBy: NotRequired[str]
    result: NotRequired[JobResult]
    traceId: NotRequired[str | None]
    #: §14.5: the failed or canceled job this one retries.
    retryOf: NotRequired[str]


class JobListItem(TypedDict):
    """A job in ``GET /v1/fetcher``: the :class:`JobResponse` shape, except that a
    ``mappedFields``/``filters`` document over 4 KiB is left out, ``metadata`` over 4 KiB is
    cut to ``source`` (the product) and ``error``, and each is named in ``truncated``."""

    id: str
    status: JobStatus
    requestHash: str
    createdAt: str
    mappedFields: NotRequired[MappedFields]
    metadata: NotRequired[dict[str, Any]]
    filters: NotRequired[dict[str, Any]]
    limits: NotRequired[dict[str, int]]
    resultPath: NotRequired[str]
    resultHmac: NotRequired[str]
    completedAt: NotRequired[str]
    createdBy: NotRequired[str]
    result: NotRequired[JobResult]
    traceId: NotRequired[str | None]
    #: §14.5: the failed or canceled job this one retries.
    retryOf: NotRequired[str]
    truncated: NotRequired[list[str]]


class JobPage(TypedDict):
    items: list[JobListItem]
    nextCursor: str | None


class FeedItem(TypedDict):
    cursor: str
    routingKey: str
    headers: dict[str, str]
    data: dict[str, Any]
    createdAt: str
    publishedAt: NotRequired[str]


class FeedPage(TypedDict):
    items: list[FeedItem]
    next: str


class HealthBody(TypedDict):
    status: str
    reason: NotRequired[str]


class ReadyCheck(TypedDict):
    status: str
    latency_ms: NotRequired[int]
    error: NotRequired[str]
    reason: NotRequired[str]


class ReadyzBody(TypedDict):
    status: str
    checks: dict[str, ReadyCheck]
    version: str
    deployment_mode: str


class VersionBody(TypedDict):
    version: str


SCHEMAS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        ConnectionCreate,
        ConnectionPage,
        ConnectionResponse,
        ConnectionUpdate,
        ErrorBody,
        FeedItem,
        FeedPage,
        HealthBody,
        JobAccepted,
        JobListItem,
        JobPage,
        JobRequest,
        JobResponse,
        JobResult,
        ReadyCheck,
        ReadyzBody,
        SchemaResponse,
        SchemaTable,
        SchemaValidationEntry,
        SslResponse,
        TestResult,
        ValidateSchemaRequest,
        ValidateSchemaSuccess,
        VersionBody,
    )
}
"""Every OpenAPI component schema name → its TypedDict."""
