"""Terminal job events: payloads (§8.2, §8.3), CloudEvents headers (§8.4), signing (§8.5).

Bodies are built once, when the terminal transition is written, and stored in the outbox;
every re-emission sends the same bytes with the same ``ce-id``, and only the signing headers
(and, on AMQP, ``ce-time``) are recomputed per publish.

Tenancy (§12.5): an event of a job of tenant ``t`` carries ``ce-tenantid: t`` and
``X-Tenant-ID: t`` from the moment it is built (the outbox keeps the headers as built), and is
signed with ``t``'s external key, the tenant line filled. The tenant ``""`` — single-tenant
mode, and rows written in it — gives ``ce-tenantid: single-tenant``, no ``X-Tenant-ID``, an
empty tenant line and the global external key, exactly as before tenancy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from fetcher.crypto import SIGNATURE_VERSION, KeySet, sign_message
from fetcher.services.jsontext import compact_json
from fetcher.services.records import EventType, OutboxEvent
from fetcher.services.timeutil import format_ms

__all__ = [
    "CompletedResult",
    "EventContext",
    "canceled_event",
    "completed_event",
    "event_trace_headers",
    "failed_event",
    "signed_headers",
    "tenant_of",
]

SCHEMA_VERSION = "2.0.0"
SINGLE_TENANT = "single-tenant"
#: §8.4/§12.5: the header naming an event's tenant (absent in single-tenant mode).
TENANT_HEADER = "X-Tenant-ID"
_PROTECTION = {"encrypted": True, "applied_by": "adapter", "mode": "adapter-managed"}


@dataclass(frozen=True, slots=True)
class EventContext:
    """Deployment values every event carries: ``ce-source`` and the events exchange."""

    source: str
    exchange: str


@dataclass(frozen=True, slots=True)
class CompletedResult:
    path: str
    size_bytes: int
    row_count: int
    hmac: str
    execution_time_ms: int


def ce_id(event_type: EventType, job_id: str) -> str:
    """§8.4: ``fetcher.job.<status>.<job_id>``, stable across re-emissions."""
    return f"fetcher.job.{event_type}.{job_id}"


def _headers(
    ctx: EventContext, event_type: EventType, job_id: str, at: datetime, *, tenant: str
) -> dict[str, str]:
    """The eleven §8.4 CloudEvents headers (``ce-time`` is the given moment), plus
    ``X-Tenant-ID`` for a tenant's job (§12.5)."""
    headers = {
        "ce-specversion": "1.0",
        "ce-id": ce_id(event_type, job_id),
        "ce-source": ctx.source,
        "ce-type": f"studio.lerian.job.{event_type}",
        "ce-time": format_ms(at),
        "ce-subject": job_id,
        "ce-resourcetype": "job",
        "ce-eventtype": event_type,
        "ce-schemaversion": SCHEMA_VERSION,
        "ce-datacontenttype": "application/json",
        "ce-tenantid": tenant or SINGLE_TENANT,
    }
    if tenant:
        headers[TENANT_HEADER] = tenant
    return headers


def tenant_of(event: OutboxEvent) -> str:
    """The tenant an event was built for (§12.5): its ``X-Tenant-ID``, or ``""``."""
    return event.headers.get(TENANT_HEADER, "")


def completed_event(
    ctx: EventContext,
    job_id: str,
    metadata_json: str,
    result: CompletedResult,
    completed_at: datetime,
    *,
    tenant: str = "",
) -> OutboxEvent:
    """§8.2, keys in exactly the contract order; ``metadata`` is the stored text verbatim.
    ``tenant`` is the job's tenant (``""`` in single-tenant mode)."""
    result_doc = {
        "path": result.path,
        "size_bytes": result.size_bytes,
        "row_count": result.row_count,
        "format": "json",
        "hmac": result.hmac,
        "integrity": {"algorithm": "HMAC-SHA256", "signature": result.hmac},
        "protection": _PROTECTION,
    }
    body = (
        f'{{"job_id":{compact_json(job_id)},"status":"completed","metadata":{metadata_json},'
        f'"result":{compact_json(result_doc)},"execution_time_ms":{result.execution_time_ms},'
        f'"completed_at":{compact_json(format_ms(completed_at))}}}'
    )
    return _event(ctx, "completed", job_id, body, completed_at, tenant=tenant)


def failed_event(
    ctx: EventContext,
    job_id: str,
    metadata_json: str,
    error: str,
    at: datetime,
    *,
    tenant: str = "",
) -> OutboxEvent:
    """§8.3: the submitted metadata with ``error`` = ``{"message": …}``; a caller's ``error``
    keeps its position, otherwise ``error`` is appended last. ``tenant`` is the job's tenant
    (``""`` in single-tenant mode)."""
    metadata = json.loads(metadata_json) if metadata_json else {}
    if not isinstance(metadata, dict):
        metadata = {}
    metadata["error"] = {"message": error}
    body = (
        f'{{"job_id":{compact_json(job_id)},"status":"failed","metadata":{compact_json(metadata)}}}'
    )
    return _event(ctx, "failed", job_id, body, at, tenant=tenant)


def canceled_event(
    ctx: EventContext,
    job_id: str,
    metadata_json: str,
    at: datetime,
    *,
    tenant: str = "",
) -> OutboxEvent:
    """§14.4: ``{"job_id","status":"canceled","metadata","canceled_at"}``, ``metadata`` the
    stored text verbatim; same envelope, headers and signing as §8.2/§8.3."""
    body = (
        f'{{"job_id":{compact_json(job_id)},"status":"canceled","metadata":{metadata_json or "{}"},'
        f'"canceled_at":{compact_json(format_ms(at))}}}'
    )
    return _event(ctx, "canceled", job_id, body, at, tenant=tenant)


def _event(
    ctx: EventContext,
    event_type: EventType,
    job_id: str,
    body: str,
    at: datetime,
    *,
    tenant: str,
) -> OutboxEvent:
    return OutboxEvent(
        ce_id=ce_id(event_type, job_id),
        job_id=job_id,
        event_type=event_type,
        routing_key=f"job.{event_type}",
        body=body.encode("utf-8"),
        headers=_headers(ctx, event_type, job_id, at, tenant=tenant),
        created_at=at,
    )


def event_trace_headers(event: OutboxEvent) -> dict[str, str]:
    """The CloudEvents distributed-tracing extension of ``event`` (issue 22): its stored
    ``traceparent``/``tracestate`` as ``ce-traceparent``/``ce-tracestate``, the ``ce-``
    prefix of the other binary-mode headers (§8.4). Outside the §8.5 signed set; empty for
    an event stored without a trace context (the record refuses a malformed one)."""
    if event.traceparent is None:
        return {}
    headers = {"ce-traceparent": event.traceparent}
    if event.tracestate is not None:
        headers["ce-tracestate"] = event.tracestate
    return headers


def signed_headers(
    keys: KeySet,
    exchange: str,
    event: OutboxEvent,
    *,
    emitted_at: datetime,
    t: int,
) -> dict[str, str]:
    """Headers for one publish: the CloudEvents headers with this attempt's ``ce-time``, plus
    ``t``, ``signature-version`` and ``x-message-signature`` (§8.5: the jobId line is empty).

    The tenant comes from the stored headers (:func:`tenant_of`): its external key signs, and
    its ID fills the tenant line (§12.5); ``""`` signs with the global key and an empty line.
    """
    headers: dict[str, str] = dict(event.headers)
    headers["ce-time"] = format_ms(emitted_at)
    tenant = tenant_of(event)
    signature = sign_message(
        keys.for_tenant(tenant).external_hmac,
        t=t,
        body=event.body,
        exchange=exchange,
        routing_key=event.routing_key,
        tenant=tenant,
    )
    headers.update(
        {"t": str(t), "signature-version": SIGNATURE_VERSION, "x-message-signature": signature}
    )
    return headers
