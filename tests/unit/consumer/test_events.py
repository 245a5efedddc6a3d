"""verify_event: typed §8.2/§8.3 values, and each specific rejection (§8.4, §8.5, §12.5)."""

from __future__ import annotations

from typing import Any

import pytest

from fetcher.consumer import (
    BadSignatureError,
    ConsumerKeys,
    EventError,
    FutureEventError,
    JobCompleted,
    JobFailed,
    MalformedEventError,
    MissingHeaderError,
    StaleEventError,
    TenantMismatchError,
    UnknownSchemaVersionError,
    event_from_feed_item,
    verify_event,
)
from tests.unit.consumer.conftest import (
    EXCHANGE,
    JOB_ID,
    MASTER_KEY,
    NOW,
    completed_body,
    failed_body,
    signed,
)

KEYS = ConsumerKeys.from_master(MASTER_KEY)
MAC = "ab" * 32
BODY = completed_body(f"external-data/{JOB_ID}.json", MAC, 184320, 1204)


def verify(headers: dict[str, Any], body: bytes = BODY, **kw: Any) -> Any:
    options: dict[str, Any] = {"exchange": EXCHANGE, "routing_key": "job.completed", "now": NOW}
    options |= kw
    keys = options.pop("keys", KEYS)
    return verify_event(headers, body, keys=keys, **options)


def test_completed_event_carries_every_82_field() -> None:
    event = verify(signed(KEYS, "completed", BODY))
    assert isinstance(event, JobCompleted)
    assert event.job_id == JOB_ID
    assert event.status == "completed"
    assert list(event.metadata) == ["source", "correlationId"]
    r = event.result
    assert (r.path, r.size_bytes, r.row_count, r.format) == (
        f"external-data/{JOB_ID}.json",
        184320,
        1204,
        "json",
    )
    assert r.hmac == MAC
    assert (r.integrity.algorithm, r.integrity.signature) == ("HMAC-SHA256", MAC)
    assert (r.protection.encrypted, r.protection.applied_by, r.protection.mode) == (
        True,
        "adapter",
        "adapter-managed",
    )
    assert event.execution_time_ms == 42
    assert event.completed_at == "2026-07-13T18:04:11.204Z"
    assert event.ce_id == f"fetcher.job.completed.{JOB_ID}"
    assert event.envelope.source == "//lerian.fetcher/worker"
    assert event.envelope.tenant_id == "single-tenant"
    assert event.body == BODY


def test_failed_event_carries_every_83_field() -> None:
    body = failed_body()
    event = verify(signed(KEYS, "failed", body), body, routing_key="job.failed")
    assert isinstance(event, JobFailed)
    assert event.metadata == {
        "source": "payments",
        "error": {"message": "failed to connect to datasource"},
    }
    assert event.error_message == "failed to connect to datasource"
    assert event.ce_id == f"fetcher.job.failed.{JOB_ID}"


def test_amqp_bytes_and_integer_header_values_are_accepted() -> None:
    headers: dict[str, object] = {k: v.encode() for k, v in signed(KEYS, "completed", BODY).items()}
    headers["t"] = NOW
    assert isinstance(verify(headers), JobCompleted)


@pytest.mark.parametrize(
    "extension",
    [
        {"ce-traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        {
            "ce-traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "ce-tracestate": "congo=t61rcWkgMzE",
        },
        {"ce-traceparent": b"not a traceparent", "x-vendor": 7},
    ],
)
def test_extension_headers_outside_the_signed_set_are_accepted(
    extension: dict[str, object],
) -> None:
    """Issue 22: an event may carry the CloudEvents distributed-tracing extension (or any
    other unsigned header); the kit neither requires nor checks it, and still verifies."""
    headers: dict[str, object] = {**signed(KEYS, "completed", BODY), **extension}
    assert isinstance(verify(headers), JobCompleted)


@pytest.mark.parametrize(
    "header", ["t", "signature-version", "x-message-signature", "ce-id", "ce-tenantid"]
)
def test_missing_header(header: str) -> None:
    headers = signed(KEYS, "completed", BODY)
    del headers[header]
    with pytest.raises(MissingHeaderError) as caught:
        verify(headers)
    assert caught.value.header == header


def test_tampered_body_routing_key_exchange_or_key_is_a_bad_signature() -> None:
    headers = signed(KEYS, "completed", BODY)
    with pytest.raises(BadSignatureError):
        verify(headers, BODY.replace(b"1204", b"1205"))
    with pytest.raises(BadSignatureError):
        verify(headers, routing_key="job.failed")
    with pytest.raises(BadSignatureError):
        verify(headers, exchange="other.exchange")
    other = ConsumerKeys(external_hmac=b"\x01" * 32)
    with pytest.raises(BadSignatureError):
        verify(headers, keys=other)
    with pytest.raises(BadSignatureError):
        verify({**headers, "signature-version": "v2"})
    with pytest.raises(BadSignatureError):
        verify({**headers, "t": "17e8"})


def test_stale_and_future_t() -> None:
    headers = signed(KEYS, "completed", BODY)
    with pytest.raises(StaleEventError) as stale:
        verify(headers, now=NOW + 3601, max_age=3600)
    assert stale.value.skew == 3601
    assert isinstance(verify(headers, now=NOW + 3600, max_age=3600), JobCompleted)
    with pytest.raises(FutureEventError):
        verify(headers, now=NOW - 31)
    assert isinstance(verify(headers, now=NOW - 30), JobCompleted)
    assert isinstance(verify(headers, now=NOW + 10**7, max_age=None), JobCompleted)


def test_unknown_schema_version() -> None:
    headers = signed(KEYS, "completed", BODY)
    with pytest.raises(UnknownSchemaVersionError) as caught:
        verify({**headers, "ce-schemaversion": "3.0.0"})
    assert caught.value.version == "3.0.0"


def test_tenant_mismatch_both_ways() -> None:
    acme = ConsumerKeys.from_master(MASTER_KEY, tenant="acme")
    with pytest.raises(TenantMismatchError):
        verify(signed(KEYS, "completed", BODY), keys=acme)
    with pytest.raises(TenantMismatchError):
        verify(signed(acme, "completed", BODY))
    assert verify(signed(acme, "completed", BODY), keys=acme).envelope.tenant_id == "acme"


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("ce-id", f"fetcher.job.completed.{'0' * 8}-0000-7000-8000-000000000009"),
        ("ce-eventtype", "failed"),
        ("ce-type", "studio.lerian.job.failed"),
        ("ce-subject", "someone-else"),
    ],
)
def test_unsigned_headers_must_agree_with_the_signed_body(header: str, value: str) -> None:
    """A rewritten ce-id would bypass deduplication: it is bound to the signed body."""
    headers = signed(KEYS, "completed", BODY)
    with pytest.raises(MalformedEventError):
        verify({**headers, header: value})


def test_signed_but_malformed_payload() -> None:
    body = BODY.replace(b'"row_count":1204', b'"row_count":"1204"')
    with pytest.raises(MalformedEventError):
        verify(signed(KEYS, "completed", body), body)
    with pytest.raises(EventError):
        verify(signed(KEYS, "completed", b"not json"), b"not json")


def test_feed_item_is_typed_without_a_signature() -> None:
    headers = {k: v for k, v in signed(KEYS, "completed", BODY).items() if k.startswith("ce-")}
    import json

    item = {
        "cursor": "7",
        "routingKey": "job.completed",
        "headers": headers,
        "data": json.loads(BODY),
    }
    event = event_from_feed_item(item, KEYS)
    assert isinstance(event, JobCompleted)
    assert event.body == BODY
    assert event.envelope.signed_at is None
    with pytest.raises(TenantMismatchError):
        event_from_feed_item(item, ConsumerKeys.from_master(MASTER_KEY, tenant="acme"))
