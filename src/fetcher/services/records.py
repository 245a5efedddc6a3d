"""Records the metadata store keeps: connections, jobs and outbox events (contract §2.5, §4, §8.6).

These are plain values. Every timestamp is timezone-aware UTC, truncated to milliseconds by the
caller before it is stored (Conventions); stores keep millisecond precision. Job request
documents are JSON **text**, kept byte for byte so key order and number text round-trip (§4.7).
Encrypted credentials never appear in ``repr`` (architecture rule 12).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Literal

from fetcher.services.trace_context import valid_trace_id, valid_traceparent, valid_tracestate

__all__ = [
    "ACTIVE_STATUSES",
    "JobStatus",
    "EventType",
    "SortOrder",
    "MetadataValue",
    "ConnectionRecord",
    "ConnectionQuery",
    "JobRecord",
    "OutboxEvent",
    "OutboxRow",
    "normalized_source",
]

#: §4.1 job statuses; ``canceled`` is §14.4.
JobStatus = Literal["pending", "processing", "completed", "failed", "canceled"]
#: §4.1: the statuses in which ``dedup_active`` is true.
ACTIVE_STATUSES: tuple[JobStatus, ...] = ("pending", "processing")
#: §8.4 ``ce-eventtype`` values, also the event feed's ``type`` filter (§2.12).
EventType = Literal["completed", "failed", "canceled"]
#: §2.6.2 ``sortOrder``.
SortOrder = Literal["asc", "desc"]
#: §2.5: connection metadata is flat; values are string, number, boolean or null.
MetadataValue = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class ConnectionRecord:
    """A stored connection (§2.5). ``metadata`` keeps its insertion order when stored.

    ``password_encrypted`` and ``ssl_key_encrypted`` are ``base64(nonce ‖ ct ‖ tag)`` text with
    the connection ID as AAD (§6.4); they are excluded from ``repr``.
    """

    id: str
    config_name: str
    type: str
    database_name: str
    created_at: datetime
    updated_at: datetime
    product_name: str | None = None
    host: str | None = None
    port: int | None = None
    schema: str | None = None
    user_name: str | None = None
    password_encrypted: str | None = field(default=None, repr=False)
    ssl_mode: str | None = None
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key_encrypted: str | None = field(default=None, repr=False)
    encryption_key_version: str = "1"
    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    deleted_at: datetime | None = None
    #: §12.5: the owning tenant; ``""`` in single-tenant mode.
    tenant: str = ""
    #: §12.4: the token ``sub`` that created it (``None`` with ``AUTH_MODE=none``).
    created_by: str | None = None
    #: Set by a list read only (issue 33): ``("metadata",)`` when the stored metadata text was
    #: over the query's ``max_document_bytes`` and was left in the database (``metadata`` is
    #: then empty). A list read also replaces an ``ssl_ca``/``ssl_cert``/``ssl_key_encrypted``
    #: over that bound with a short placeholder: a list answer only says TLS is set.
    cut: tuple[Literal["metadata"], ...] = ()


@dataclass(frozen=True, slots=True)
class ConnectionQuery:
    """One slice of the stored-connection sequence of §2.6.2 / §2.6.3.

    ``offset``/``limit`` (not page numbers) let the Manager splice internal datasources in
    front of the stored ones. ``created_from`` is inclusive, ``created_before`` exclusive.
    ``metadata`` pairs are ANDed: a pair matches when the value is a string equal to it, or a
    number or boolean whose JSON text equals it. ``product`` scopes to one product;
    ``products`` (a product-restricted token, §12.4) to any of these (none when empty);
    ``unassigned_only`` to connections with no product (§2.6.3). Deleted rows never match.
    The tenant is not a filter here but a required argument of the read (§12.5).
    """

    offset: int = 0
    limit: int = 10
    sort: SortOrder = "desc"
    product: str | None = None
    products: frozenset[str] | None = None
    unassigned_only: bool = False
    type: str | None = None
    created_from: datetime | None = None
    created_before: datetime | None = None
    metadata: Sequence[tuple[str, str]] = ()
    #: A listed row's documents over this many bytes stay in the database (``cut``).
    max_document_bytes: int = 4096


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job row (§4). The ``*_json`` documents are stored and returned as the exact text given.

    ``connection_ids`` maps each stored datasource's ``configName`` to the connection ID
    resolved at job creation (§4.7). ``dedup_active`` is true exactly while the status is
    ``pending`` or ``processing`` (§3.8). ``error`` is the §4.5 failure text.
    """

    id: str
    status: JobStatus
    request_hash: str
    mapped_fields_json: str
    metadata_json: str
    created_at: datetime
    updated_at: datetime
    filters_json: str | None = None
    limits_json: str | None = None
    connection_ids: dict[str, str] = field(default_factory=dict)
    dedup_active: bool = True
    result_path: str | None = None
    result_hmac: str | None = None
    #: §14.1: JSON text ``{"sizeBytes","plaintextBytes","rowCount","tables"}`` of the stored
    #: object (``None`` before completion and for jobs completed before it was recorded).
    result_summary_json: str | None = None
    #: §14.3: the ``APP_ENC_KEY_VERSION`` whose keys sealed and MACed the object.
    result_key_version: str | None = None
    error: str | None = None
    request_id: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    #: §12.5: the owning tenant; ``""`` in single-tenant mode.
    tenant: str = ""
    #: §12.4: the token ``sub`` that created it (``None`` with ``AUTH_MODE=none``).
    created_by: str | None = None
    #: §15.3: the W3C trace ID (32 lowercase hex) of the sampled request span that created
    #: it; ``None`` when that request was not traced.
    trace_id: str | None = None
    #: §14.5: the ``failed`` or ``canceled`` job this one retries; ``None`` otherwise.
    retry_of: str | None = None

    def __post_init__(self) -> None:
        if self.trace_id is not None and not valid_trace_id(self.trace_id):
            raise ValueError("trace_id is not a W3C trace ID")


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    """A terminal job event to write with its transition (§8.6).

    ``ce_id`` is ``fetcher.job.<status>.<job_id>`` (§8.4) and is unique in the outbox. ``body``
    is the exact payload bytes (§8.2, §8.3); ``headers`` are the eleven §8.4 CloudEvents
    headers with ``ce-time`` = ``created_at`` (§2.12), in the given order.

    ``traceparent``/``tracestate`` are the job's W3C trace context at its terminal transition
    (``None`` with tracing off or no valid current span): stored apart from ``headers`` (the feed
    shows the eleven §8.4 headers only) and sent as ``ce-traceparent``/``ce-tracestate`` on
    every publish. A malformed value is refused here, so none can be stored or sent.
    """

    ce_id: str
    job_id: str
    event_type: EventType
    routing_key: str
    body: bytes
    headers: dict[str, str]
    created_at: datetime
    traceparent: str | None = field(default=None, kw_only=True)
    tracestate: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if self.traceparent is not None and not valid_traceparent(self.traceparent):
            raise ValueError("traceparent is not a W3C version-00 trace context")
        if self.tracestate is not None and (
            self.traceparent is None or not valid_tracestate(self.tracestate)
        ):
            raise ValueError("tracestate is not a W3C tracestate of a stored traceparent")


_EVENT_FIELDS = tuple(f.name for f in fields(OutboxEvent))


@dataclass(frozen=True, slots=True)
class OutboxRow(OutboxEvent):
    """A stored outbox row: the event's fields, plus its row ID, its feed position (``None``
    until assigned, §2.12), when it was sent, and its tenant.

    ``tenant`` is the tenant of the row's job (§12.5), copied by the store when it writes the
    row, so the relay signs it with that tenant's key (§8.5).
    """

    id: int
    feed_seq: int | None
    sent_at: datetime | None = None
    tenant: str = ""

    def event(self) -> OutboxEvent:
        """The event this row stores (an :class:`OutboxEvent`, without the row's fields)."""
        return OutboxEvent(**{name: getattr(self, name) for name in _EVENT_FIELDS})


def normalized_source(metadata_json: str) -> str:
    """§3.7: ``lower(trim(metadata.source))`` of a stored job's metadata document: the job's
    product, against which ownership (§3.7) and product-restricted tokens (§12.4) are checked.
    ``""`` when the document has no string ``source`` (never the case for an accepted job)."""
    document = json.loads(metadata_json)
    source = document.get("source") if isinstance(document, dict) else None
    return source.strip().lower() if isinstance(source, str) else ""
