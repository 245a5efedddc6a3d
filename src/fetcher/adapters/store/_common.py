"""Backend-neutral pieces of the metadata store adapters: columns, row mapping, migrations.

The statements themselves are in :mod:`._statements`, what the backends spell differently in
:mod:`._dialect`.

Rows arrive as mappings of column name to driver value; ``ts`` converts a driver timestamp to
an aware UTC ``datetime`` (SQLite stores ISO text, PostgreSQL ``timestamptz``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any, cast

from fetcher.services.records import (
    ACTIVE_STATUSES,
    ConnectionRecord,
    EventType,
    JobRecord,
    JobStatus,
    MetadataValue,
    OutboxEvent,
    OutboxRow,
    normalized_source,
)
from fetcher.services.timeutil import format_ms, truncate_ms
from fetcher.services.trace_context import valid_traceparent, valid_tracestate

__all__ = [
    "CONNECTION_COLUMNS",
    "JOB_COLUMNS",
    "Migration",
    "load_migrations",
    "utc_ms",
    "ts_text",
    "parse_ts_text",
    "datasource_names",
    "metadata_matches",
    "failable_statuses",
    "connection_params",
    "connection_from_row",
    "job_params",
    "job_from_row",
    "event_params",
    "outbox_from_row",
    "job_products",
]

CONNECTION_COLUMNS = (
    "id, product_name, config_name, type, host, port, database_name, schema_name, user_name, "
    "password_encrypted, ssl_mode, ssl_ca, ssl_cert, ssl_key_encrypted, encryption_key_version, "
    "metadata_json, created_at, updated_at, deleted_at, tenant_id, created_by"
)
JOB_COLUMNS = (
    "id, status, request_hash, dedup_active, mapped_fields_json, filters_json, limits_json, "
    "metadata_json, connection_ids_json, result_path, result_hmac, result_summary_json, "
    "result_key_version, error, request_id, "
    "created_at, started_at, completed_at, updated_at, tenant_id, created_by, product, trace_id, "
    "retry_of"
)
#: §12.5: columns a connection write never changes (an update keeps the row's tenant).
CONNECTION_FIXED = frozenset(
    {"id", "product_name", "created_at", "deleted_at", "tenant_id", "created_by"}
)
#: The migration after which the stores fill ``jobs.product`` and ``outbox.product`` of rows
#: written before it (:func:`job_products`).
TENANT_MIGRATION = 2
#: Rows per backfill batch.
BACKFILL_BATCH = 500

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_JOB_STATUSES = frozenset({"pending", "processing", "completed", "failed", "canceled"})
_EVENT_TYPES = frozenset({"completed", "failed", "canceled"})

TimestampReader = Callable[[Any], datetime]


@dataclass(frozen=True, slots=True)
class Migration:
    """One versioned schema script (``migrations/<backend>/NNNN_name.sql``)."""

    version: int
    name: str
    sql: str


def load_migrations(backend: str) -> list[Migration]:
    """The migrations shipped for ``backend`` (``postgres`` or ``sqlite``), by version."""
    folder = resources.files(__package__ or "fetcher.adapters.store") / "migrations" / backend
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    return found


def utc_ms(value: datetime) -> datetime:
    """``value`` in UTC, truncated to milliseconds (Conventions). Naive values are refused."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("metadata store timestamps must be timezone-aware")
    return truncate_ms(value.astimezone(UTC))


def ts_text(value: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` (Conventions); lexical order is chronological order."""
    return format_ms(utc_ms(value))


def parse_ts_text(value: str) -> datetime:
    """The inverse of :func:`ts_text`."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def datasource_names(mapped_fields_json: str) -> list[str]:
    """The top-level keys of a ``mappedFields`` document: the job's datasources (§3.2)."""
    document = json.loads(mapped_fields_json)
    return list(document) if isinstance(document, dict) else []


class _NumberText(str):
    """A JSON number kept as its source text."""

    __slots__ = ()


def metadata_matches(metadata_json: str, key: str, value: str) -> bool:
    """§2.6.2: ``metadata[key]`` is a string equal to ``value``, or a number or boolean whose
    JSON text equals it."""
    document = json.loads(metadata_json, parse_int=_NumberText, parse_float=_NumberText)
    if not isinstance(document, dict) or key not in document:
        return False
    found = document[key]
    if isinstance(found, bool):
        return ("true" if found else "false") == value
    if isinstance(found, str):
        return str(found) == value
    return False


def failable_statuses(from_statuses: Sequence[JobStatus]) -> tuple[JobStatus, ...]:
    """§4.1: only ``pending`` and ``processing`` jobs can fail; duplicates are dropped."""
    statuses = tuple(dict.fromkeys(from_statuses))
    if not statuses or any(s not in ACTIVE_STATUSES for s in statuses):
        raise ValueError("from_statuses must be a non-empty subset of pending, processing")
    return statuses


def _opt_ts(value: Any, ts: TimestampReader) -> datetime | None:
    return None if value is None else ts(value)


def connection_params(record: ConnectionRecord, ts: Callable[[datetime], Any]) -> dict[str, Any]:
    """Named query parameters for every connection column."""
    return {
        "id": record.id,
        "product_name": record.product_name,
        "config_name": record.config_name,
        "type": record.type,
        "host": record.host,
        "port": record.port,
        "database_name": record.database_name,
        "schema_name": record.schema,
        "user_name": record.user_name,
        "password_encrypted": record.password_encrypted,
        "ssl_mode": record.ssl_mode,
        "ssl_ca": record.ssl_ca,
        "ssl_cert": record.ssl_cert,
        "ssl_key_encrypted": record.ssl_key_encrypted,
        "encryption_key_version": record.encryption_key_version,
        "metadata_json": json.dumps(record.metadata, ensure_ascii=False, allow_nan=False),
        "created_at": ts(record.created_at),
        "updated_at": ts(record.updated_at),
        "deleted_at": None if record.deleted_at is None else ts(record.deleted_at),
        "tenant_id": record.tenant,
        "created_by": record.created_by,
    }


def connection_from_row(row: Mapping[str, Any], ts: TimestampReader) -> ConnectionRecord:
    """A :class:`ConnectionRecord` from a row of :data:`CONNECTION_COLUMNS`."""
    metadata = cast(dict[str, MetadataValue], json.loads(row["metadata_json"]))
    return ConnectionRecord(
        id=row["id"],
        product_name=row["product_name"],
        config_name=row["config_name"],
        type=row["type"],
        host=row["host"],
        port=row["port"],
        database_name=row["database_name"],
        schema=row["schema_name"],
        user_name=row["user_name"],
        password_encrypted=row["password_encrypted"],
        ssl_mode=row["ssl_mode"],
        ssl_ca=row["ssl_ca"],
        ssl_cert=row["ssl_cert"],
        ssl_key_encrypted=row["ssl_key_encrypted"],
        encryption_key_version=row["encryption_key_version"],
        metadata=metadata,
        created_at=ts(row["created_at"]),
        updated_at=ts(row["updated_at"]),
        deleted_at=_opt_ts(row["deleted_at"], ts),
        tenant=row["tenant_id"],
        created_by=row["created_by"],
    )


def job_params(record: JobRecord, ts: Callable[[datetime], Any]) -> dict[str, Any]:
    """Named query parameters for every job column (``dedup_active`` as a Python bool)."""

    def opt(value: datetime | None) -> Any:
        return None if value is None else ts(value)

    return {
        "id": record.id,
        "status": record.status,
        "request_hash": record.request_hash,
        "dedup_active": record.dedup_active,
        "mapped_fields_json": record.mapped_fields_json,
        "filters_json": record.filters_json,
        "limits_json": record.limits_json,
        "metadata_json": record.metadata_json,
        "connection_ids_json": json.dumps(record.connection_ids, ensure_ascii=False),
        "result_path": record.result_path,
        "result_hmac": record.result_hmac,
        "result_summary_json": record.result_summary_json,
        "result_key_version": record.result_key_version,
        "error": record.error,
        "request_id": record.request_id,
        "created_at": ts(record.created_at),
        "started_at": opt(record.started_at),
        "completed_at": opt(record.completed_at),
        "updated_at": ts(record.updated_at),
        "tenant_id": record.tenant,
        "created_by": record.created_by,
        "product": normalized_source(record.metadata_json),
        "trace_id": record.trace_id,
        "retry_of": record.retry_of,
    }


def job_status(status: Any) -> JobStatus:
    """A stored status, refused when it is not one of §4.1/§14.4."""
    if status not in _JOB_STATUSES:
        raise ValueError(f"unknown job status in store: {status!r}")
    return cast(JobStatus, status)


def job_from_row(row: Mapping[str, Any], ts: TimestampReader) -> JobRecord:
    """A :class:`JobRecord` from a row of :data:`JOB_COLUMNS`."""
    return JobRecord(
        id=row["id"],
        status=job_status(row["status"]),
        request_hash=row["request_hash"],
        dedup_active=bool(row["dedup_active"]),
        mapped_fields_json=row["mapped_fields_json"],
        filters_json=row["filters_json"],
        limits_json=row["limits_json"],
        metadata_json=row["metadata_json"],
        connection_ids=cast(dict[str, str], json.loads(row["connection_ids_json"])),
        result_path=row["result_path"],
        result_hmac=row["result_hmac"],
        result_summary_json=row["result_summary_json"],
        result_key_version=row["result_key_version"],
        error=row["error"],
        request_id=row["request_id"],
        created_at=ts(row["created_at"]),
        started_at=_opt_ts(row["started_at"], ts),
        completed_at=_opt_ts(row["completed_at"], ts),
        updated_at=ts(row["updated_at"]),
        tenant=row["tenant_id"],
        created_by=row["created_by"],
        trace_id=row["trace_id"],
        retry_of=row["retry_of"],
    )


def job_products(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """``{"id", "product"}`` for job rows (``id``, ``metadata_json``) written before the
    tenant migration: the product is the normalized source (§3.7), computed by the same Python
    rule as at insert, since SQL ``lower``/``trim`` differ from it outside ASCII."""
    return [{"id": r["id"], "product": normalized_source(r["metadata_json"])} for r in rows]


def event_params(event: OutboxEvent, ts: Callable[[datetime], Any]) -> dict[str, Any]:
    """Named query parameters for an outbox insert."""
    if event.event_type not in _EVENT_TYPES:
        raise ValueError(f"unknown event type: {event.event_type!r}")
    return {
        "ce_id": event.ce_id,
        "job_id": event.job_id,
        "event_type": event.event_type,
        "routing_key": event.routing_key,
        "body": bytes(event.body),
        "headers_json": json.dumps(event.headers, ensure_ascii=False),
        "created_at": ts(event.created_at),
        "traceparent": event.traceparent,
        "tracestate": event.tracestate,
    }


def outbox_from_row(row: Mapping[str, Any], ts: TimestampReader) -> OutboxRow:
    """An :class:`OutboxRow` from a row of the outbox columns, the feed sequence as ``feed_seq``."""
    return OutboxRow(
        id=int(row["id"]),
        feed_seq=None if row["feed_seq"] is None else int(row["feed_seq"]),
        ce_id=row["ce_id"],
        job_id=row["job_id"],
        event_type=cast(EventType, row["event_type"]),
        routing_key=row["routing_key"],
        body=bytes(row["body"]),
        headers=cast(dict[str, str], json.loads(row["headers_json"])),
        created_at=ts(row["created_at"]),
        sent_at=_opt_ts(row["sent_at"], ts),
        tenant=row["tenant_id"],
        **_trace_context(row["traceparent"], row["tracestate"]),
    )


def _trace_context(traceparent: object, tracestate: object) -> dict[str, str | None]:
    """The stored trace context, or none: a value that is not well-formed W3C (written by
    hand, say) is dropped rather than jam the relay; the row is still published, untraced."""
    if not valid_traceparent(traceparent):
        return {"traceparent": None, "tracestate": None}
    return {
        "traceparent": cast(str, traceparent),
        "tracestate": cast(str, tracestate) if valid_tracestate(tracestate) else None,
    }
