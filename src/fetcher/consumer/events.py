"""Verify a received job event and turn it into a typed value (CONTRACT §8.1–§8.5, §12.5).

:func:`verify_event` takes what a broker delivers — application headers, body bytes, the
exchange and the routing key it arrived through — plus the consumer's keys, and returns a
:class:`JobCompleted` or :class:`JobFailed`, or raises a specific :class:`EventError`. The
checks run in this order:

1. every §8.4 CloudEvents header and the three §8.5 signing headers are present
   (:class:`MissingHeaderError`);
2. ``ce-tenantid`` (and ``X-Tenant-ID`` when sent) name the keys' tenant, ``single-tenant``
   and no ``X-Tenant-ID`` without one (:class:`TenantMismatchError`);
3. ``signature-version`` is ``v1``, ``t`` is an integer, and ``x-message-signature`` equals
   HMAC-SHA256(external key, ``t\\nv1\\n<tenant>\\n\\n<exchange>\\n<routingKey>\\n<body>``) —
   the jobId line is empty for events, the exchange and routing key are the ones the message
   was *delivered* through, compared in constant time (:class:`BadSignatureError`);
4. ``t`` is at most ``max_age`` seconds old and ``max_future`` ahead (:class:`StaleEventError`,
   :class:`FutureEventError`);
5. ``ce-schemaversion`` is ``2.0.0`` (:class:`UnknownSchemaVersionError`);
6. the body is a §8.2/§8.3 payload, and the unsigned headers agree with the signed body:
   routing key ``job.<status>``, ``ce-eventtype``, ``ce-type``, ``ce-subject`` and above all
   ``ce-id`` = ``fetcher.job.<status>.<job_id>`` — the deduplication key is therefore bound to
   the signature, and a rewritten ``ce-id`` cannot smuggle a duplicate past a
   :class:`~fetcher.consumer.dedup.Deduplicator` (:class:`MalformedEventError`).

The freshness window is the consumer's choice (the contract fixes none for events): the
default accepts 24 h of queue backlog and 30 s of clock skew. A repeated event within the
window is caught by deduplication on ``ce-id``, so keep the deduplication TTL at least as long.

Events read from the HTTP feed (§2.12) carry no signing headers; :func:`event_from_feed_item`
applies steps 2, 5 and 6 only — that channel is authenticated by HTTPS and the bearer token.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from fetcher.consumer.errors import (
    BadSignatureError,
    FutureEventError,
    MalformedEventError,
    MissingHeaderError,
    StaleEventError,
    TenantMismatchError,
    UnknownSchemaVersionError,
)
from fetcher.consumer.keys import ConsumerKeys
from fetcher.crypto.signing import SIGNATURE_VERSION, verify_message

__all__ = [
    "CE_HEADERS",
    "DEFAULT_MAX_AGE_SECONDS",
    "DEFAULT_MAX_FUTURE_SECONDS",
    "SCHEMA_VERSION",
    "Envelope",
    "Integrity",
    "JobCompleted",
    "JobEvent",
    "JobFailed",
    "Protection",
    "ResultInfo",
    "event_from_feed_item",
    "verify_event",
]

SCHEMA_VERSION = "2.0.0"
DEFAULT_MAX_AGE_SECONDS = 24 * 3600
DEFAULT_MAX_FUTURE_SECONDS = 30
CE_HEADERS = (
    "ce-specversion",
    "ce-id",
    "ce-source",
    "ce-type",
    "ce-time",
    "ce-subject",
    "ce-resourcetype",
    "ce-eventtype",
    "ce-schemaversion",
    "ce-datacontenttype",
    "ce-tenantid",
)
SIGNING_HEADERS = ("t", "signature-version", "x-message-signature")
_T_FORM = re.compile(r"[0-9]{1,12}")
_STATUSES = ("completed", "failed")


@dataclass(frozen=True, slots=True)
class Envelope:
    """The §8.4 CloudEvents context attributes, plus the §8.5 signing time (None from the feed)."""

    id: str
    source: str
    type: str
    time: str
    subject: str
    resource_type: str
    event_type: str
    schema_version: str
    data_content_type: str
    tenant_id: str
    spec_version: str
    signed_at: int | None


@dataclass(frozen=True, slots=True)
class Integrity:
    algorithm: str
    signature: str


@dataclass(frozen=True, slots=True)
class Protection:
    encrypted: bool
    applied_by: str
    mode: str


@dataclass(frozen=True, slots=True)
class ResultInfo:
    """§8.2 ``result``: where the encrypted object is and what its plaintext must be."""

    path: str
    size_bytes: int
    row_count: int
    format: str
    hmac: str
    integrity: Integrity
    protection: Protection


class _EventKey:
    """The deduplication key both verified events carry."""

    __slots__ = ()
    envelope: Envelope

    @property
    def ce_id(self) -> str:
        """The deduplication key (§8.4), bound to the signed body."""
        return self.envelope.id


@dataclass(frozen=True, slots=True)
class JobCompleted(_EventKey):
    """A verified ``job.completed`` (§8.2)."""

    job_id: str
    metadata: dict[str, Any]
    result: ResultInfo
    execution_time_ms: int
    completed_at: str
    envelope: Envelope
    body: bytes
    status: Literal["completed"] = "completed"


@dataclass(frozen=True, slots=True)
class JobFailed(_EventKey):
    """A verified ``job.failed`` (§8.3); ``error_message`` is ``metadata.error.message``."""

    job_id: str
    metadata: dict[str, Any]
    error_message: str
    envelope: Envelope
    body: bytes
    status: Literal["failed"] = "failed"


JobEvent = JobCompleted | JobFailed


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, bool):
        return None
    if isinstance(value, int | str):
        return str(value)
    return None


def _normalize(headers: Mapping[str, object]) -> dict[str, str]:
    """Header names compared case-insensitively; values as text (AMQP gives bytes or ints)."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        text = _text(value)
        if text is not None:
            out[str(name).lower()] = text
    return out


def _require(headers: Mapping[str, str], names: tuple[str, ...]) -> None:
    for name in names:
        if name not in headers:
            raise MissingHeaderError(name)


def _check_tenant(headers: Mapping[str, str], keys: ConsumerKeys) -> None:
    received = headers["ce-tenantid"]
    if received != keys.tenant_id:
        raise TenantMismatchError(keys.tenant_id, received)
    sent = headers.get("x-tenant-id")
    if sent is not None and sent != (keys.tenant or ""):
        raise TenantMismatchError(keys.tenant_id, sent)


def _check_signature(
    headers: Mapping[str, str], body: bytes, exchange: str, routing_key: str, keys: ConsumerKeys
) -> int:
    if headers["signature-version"] != SIGNATURE_VERSION:
        raise BadSignatureError("unsupported signature-version")
    t = headers["t"]
    if _T_FORM.fullmatch(t) is None:
        raise BadSignatureError("t is not a Unix time in seconds")
    ok = verify_message(
        keys.external_hmac,
        headers["x-message-signature"],
        t=t,
        body=body,
        exchange=exchange,
        routing_key=routing_key,
        tenant=keys.tenant or "",
    )
    if not ok:
        raise BadSignatureError("message signature does not verify")
    return int(t)


def _check_time(t: int, now: float, max_age: float | None, max_future: float | None) -> None:
    skew = int(now) - t
    if max_age is not None and skew > max_age:
        raise StaleEventError(f"event signed {skew} s ago (accepted: {max_age:g} s)", skew)
    if max_future is not None and -skew > max_future:
        raise FutureEventError(f"event signed {-skew} s in the future", skew)


def verify_event(
    headers: Mapping[str, object],
    body: bytes,
    *,
    exchange: str,
    routing_key: str,
    keys: ConsumerKeys,
    max_age: float | None = DEFAULT_MAX_AGE_SECONDS,
    max_future: float | None = DEFAULT_MAX_FUTURE_SECONDS,
    now: float | None = None,
) -> JobEvent:
    """Verify one delivered event (module docstring, steps 1–6) and return it typed.

    ``max_age`` / ``max_future`` of ``None`` disable that bound; ``now`` (Unix seconds) is for
    tests. Raises a subclass of :class:`~fetcher.consumer.errors.EventError`.
    """
    flat = _normalize(headers)
    _require(flat, CE_HEADERS + SIGNING_HEADERS)
    _check_tenant(flat, keys)
    body = bytes(body)
    t = _check_signature(flat, body, exchange, routing_key, keys)
    _check_time(t, time.time() if now is None else now, max_age, max_future)
    return _typed(flat, body, routing_key, signed_at=t)


def event_from_feed_item(item: Mapping[str, Any], keys: ConsumerKeys) -> JobEvent:
    """A §2.12 feed item (``routingKey``, ``headers``, ``data``) as a typed event.

    The feed carries no signature: only the tenant, the schema version and the
    header/body agreement are checked. ``body`` is ``data`` re-encoded compactly with
    ``ensure_ascii=False`` (the feed returns parsed JSON, not the stored bytes).
    """
    raw_headers = item.get("headers")
    routing_key = item.get("routingKey")
    data = item.get("data")
    if not isinstance(raw_headers, Mapping) or not isinstance(routing_key, str):
        raise MalformedEventError("feed item without headers or routingKey")
    if not isinstance(data, Mapping):
        raise MalformedEventError("feed item without data")
    flat = _normalize(raw_headers)
    _require(flat, CE_HEADERS)
    _check_tenant(flat, keys)
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return _typed(flat, body, routing_key, signed_at=None)


def _typed(
    headers: Mapping[str, str], body: bytes, routing_key: str, signed_at: int | None
) -> JobEvent:
    if headers["ce-schemaversion"] != SCHEMA_VERSION:
        raise UnknownSchemaVersionError(headers["ce-schemaversion"])
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        raise MalformedEventError("event body is not JSON") from None
    if not isinstance(payload, dict):
        raise MalformedEventError("event body is not a JSON object")
    status, job_id = payload.get("status"), payload.get("job_id")
    if status not in _STATUSES or not isinstance(job_id, str) or not job_id:
        raise MalformedEventError("event body lacks job_id or a terminal status")
    expected = {
        "routing key": (routing_key, f"job.{status}"),
        "ce-eventtype": (headers["ce-eventtype"], status),
        "ce-type": (headers["ce-type"], f"studio.lerian.job.{status}"),
        "ce-subject": (headers["ce-subject"], job_id),
        "ce-id": (headers["ce-id"], f"fetcher.job.{status}.{job_id}"),
    }
    for name, (got, want) in expected.items():
        if got != want:
            raise MalformedEventError(f"{name} does not match the signed body")
    envelope = _envelope(headers, signed_at)
    if status == "completed":
        return _completed(payload, envelope, body)
    return _failed(payload, envelope, body)


def _envelope(headers: Mapping[str, str], signed_at: int | None) -> Envelope:
    return Envelope(
        id=headers["ce-id"],
        source=headers["ce-source"],
        type=headers["ce-type"],
        time=headers["ce-time"],
        subject=headers["ce-subject"],
        resource_type=headers["ce-resourcetype"],
        event_type=headers["ce-eventtype"],
        schema_version=headers["ce-schemaversion"],
        data_content_type=headers["ce-datacontenttype"],
        tenant_id=headers["ce-tenantid"],
        spec_version=headers["ce-specversion"],
        signed_at=signed_at,
    )


def _field(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MalformedEventError(f"event field {name!r} is missing or has the wrong type")
    return value


def _completed(payload: Mapping[str, Any], envelope: Envelope, body: bytes) -> JobCompleted:
    result = _field(payload, "result", dict)
    integrity = _field(result, "integrity", dict)
    protection = _field(result, "protection", dict)
    info = ResultInfo(
        path=_field(result, "path", str),
        size_bytes=_field(result, "size_bytes", int),
        row_count=_field(result, "row_count", int),
        format=_field(result, "format", str),
        hmac=_field(result, "hmac", str),
        integrity=Integrity(
            _field(integrity, "algorithm", str), _field(integrity, "signature", str)
        ),
        protection=Protection(
            _field(protection, "encrypted", bool),
            _field(protection, "applied_by", str),
            _field(protection, "mode", str),
        ),
    )
    if info.integrity.signature != info.hmac:
        raise MalformedEventError("result.integrity.signature differs from result.hmac")
    return JobCompleted(
        job_id=_field(payload, "job_id", str),
        metadata=_field(payload, "metadata", dict),
        result=info,
        execution_time_ms=_field(payload, "execution_time_ms", int),
        completed_at=_field(payload, "completed_at", str),
        envelope=envelope,
        body=body,
    )


def _failed(payload: Mapping[str, Any], envelope: Envelope, body: bytes) -> JobFailed:
    metadata = _field(payload, "metadata", dict)
    error = _field(metadata, "error", dict)
    return JobFailed(
        job_id=_field(payload, "job_id", str),
        metadata=metadata,
        error_message=_field(error, "message", str),
        envelope=envelope,
        body=body,
    )
