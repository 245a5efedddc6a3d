"""§12.5 per-tenant keys against the §12.6 vectors, through the product code paths: the key
set, the result HMAC, object decryption, work-message headers and event headers.

The single-tenant vectors of §6.6 must not move: the tenant ``""`` is the global key set.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fetcher.crypto import (
    DecryptionError,
    KeySet,
    decrypt_object,
    hmac_hex,
    is_tenant_id,
)
from fetcher.crypto.keys import TENANT_CACHE_SIZE
from fetcher.services.events.job_events import EventContext, failed_event, signed_headers
from fetcher.services.jobs.work_messages import signed_work_headers, work_message_headers
from fetcher.services.records import JobRecord, OutboxEvent
from tests.unit.crypto.vectors import STORED_EMPTY_DOC

TENANT_VECTORS = {
    "acme": (
        "0b5dcfb07cc6607fdc334fa442c8dd5c42a4da50e592bb15abd28675b4bd211b",
        "bd147d917e899741617a3101824618d2a0464da70f0eb27225413aa7ec3e7465",
    ),
    "globex": (
        "0a234fd73d4d0293b803aa8d991bc05c6104227f6e5f17a5a5d0298a59dd4604",
        "67e526d7b7d069dbad51452ab8040b8563a94359d23792c8fe56816547422ed7",
    ),
}
SINGLE_TENANT = {
    "credentials": "4580312d2cec32a18a6e3019ef77974f4355f123dd5c9ba63d45877875ee5d8f",
    "internal_hmac": "3815bac033f891b675602702e657d42abb7ab87d5d946d196cd949041fe01fa5",
    "external_hmac": "7fada934843cf2ac1b71dd13e1f06296c04bc538671c66c571ab606d2c28e8d7",
    "storage": "381c26d1db0224dbe2755393c835fcc5b968e050659cae102ebfcb0779a2d777",
}
ACME_EMPTY_DOC_HMAC = "dc501f78bdc51a45c747778085edb784dee6b0129098afbcb57465d26b54d7e9"
ACME_STORED_EMPTY_DOC = b"AAAAAAAAAAAAAAAAUbj4ULL6XVfjv5efWzfoLHQv"
JOB_ID = "0190a1b2-0000-7000-8000-000000000001"
WORK_QUEUE = "fetcher.extract-external-data.queue"
ACME_WORK_SIGNATURE = "be1186c346afb72916e50e90de6460bb3d95ede3ff634ca0a11f8aad58b9c99f"
SINGLE_WORK_SIGNATURE = "11f3993b1cc9796f6937e67ed9f827754e37fdda85270a1732a92d8ba303071f"
ACME_EVENT_SIGNATURE = "34dd6c305cda3b961ff1692ac2c9fce48ac4f22db9fdfcba876b5ee52ad45a34"
SINGLE_EVENT_SIGNATURE = "aeef9b589b34f8306ccb2833dfe6e37135011c4e69d0ff360f386b44e788e497"
EVENTS_EXCHANGE = "fetcher.job.events"
AT = datetime(2026, 7, 13, 18, 4, 2, 783000, tzinfo=UTC)


@pytest.mark.parametrize("tenant", sorted(TENANT_VECTORS))
def test_tenant_keys_are_the_126_vectors(keys: KeySet, tenant: str) -> None:
    external, storage = TENANT_VECTORS[tenant]
    derived = keys.for_tenant(tenant)
    assert (derived.external_hmac.hex(), derived.storage.hex()) == (external, storage)
    # The credentials and internal HMAC keys stay global (§12.5).
    assert derived.credentials == keys.credentials
    assert derived.internal_hmac == keys.internal_hmac


@pytest.mark.parametrize(("name", "expected"), sorted(SINGLE_TENANT.items()))
def test_tenant_empty_is_the_66_key_set(keys: KeySet, name: str, expected: str) -> None:
    assert keys.for_tenant("") is keys
    assert getattr(keys.for_tenant(""), name).hex() == expected


def test_hmac_of_empty_document_with_acme_key(keys: KeySet) -> None:
    assert hmac_hex(keys.for_tenant("acme").external_hmac, b"{}") == ACME_EMPTY_DOC_HMAC
    assert hmac_hex(keys.external_hmac, b"{}") != ACME_EMPTY_DOC_HMAC


def test_acme_object_decrypts_only_with_acme_storage_key(keys: KeySet) -> None:
    assert decrypt_object(keys.for_tenant("acme").storage, ACME_STORED_EMPTY_DOC) == b"{}"
    for other in (keys.storage, keys.for_tenant("globex").storage):
        with pytest.raises(DecryptionError):
            decrypt_object(other, ACME_STORED_EMPTY_DOC)
    # And the §6.6 single-tenant object stays readable with the global key only.
    assert decrypt_object(keys.storage, STORED_EMPTY_DOC) == b"{}"
    with pytest.raises(DecryptionError):
        decrypt_object(keys.for_tenant("acme").storage, STORED_EMPTY_DOC)


def _job(tenant: str) -> JobRecord:
    return JobRecord(
        id=JOB_ID,
        status="pending",
        request_hash="h",
        mapped_fields_json='{"pg":{"t":["a"]}}',
        metadata_json='{"source":"payments"}',
        filters_json=None,
        limits_json=None,
        connection_ids={},
        request_id="r-1",
        created_at=AT,
        updated_at=AT,
        tenant=tenant,
    )


def test_work_message_signature_with_tenant_acme(keys: KeySet) -> None:
    body = f'{{"jobId":"{JOB_ID}"}}'.encode()
    headers = signed_work_headers(
        keys.internal_hmac,
        body,
        routing_key=WORK_QUEUE,
        base={"jobId": JOB_ID, "X-Tenant-ID": "globex"},  # a caller's value is overwritten
        t=1700000000,
        tenant="acme",
    )
    assert headers["X-Tenant-ID"] == "acme"
    assert headers["x-message-signature"] == ACME_WORK_SIGNATURE


def test_work_message_without_tenant_is_the_66_vector(keys: KeySet) -> None:
    body = f'{{"jobId":"{JOB_ID}"}}'.encode()
    headers = signed_work_headers(
        keys.internal_hmac,
        body,
        routing_key=WORK_QUEUE,
        base={"jobId": JOB_ID, "X-Tenant-ID": "acme"},
        t=1700000000,
    )
    assert "X-Tenant-ID" not in headers
    assert headers["x-message-signature"] == SINGLE_WORK_SIGNATURE


@pytest.mark.parametrize("tenant", ["", "acme"])
def test_work_message_headers_follow_the_jobs_tenant(keys: KeySet, tenant: str) -> None:
    body = b"{}"
    headers = work_message_headers(
        keys.internal_hmac, _job(tenant), body, routing_key=WORK_QUEUE, request_id="r-9"
    )
    assert headers.get("X-Tenant-ID") == (tenant or None)
    assert (headers["jobId"], headers["x-request-id"], headers["x-retry-count"]) == (
        JOB_ID,
        "r-9",
        0,
    )
    again = signed_work_headers(
        keys.internal_hmac, body, routing_key=WORK_QUEUE, base={}, t=int(headers["t"]), tenant=""
    )
    # The tenant line is signed: the same message without it has another signature.
    assert (again["x-message-signature"] == headers["x-message-signature"]) == (tenant == "")


def _vector_event(tenant: str) -> OutboxEvent:
    """The §8.5 example event, built by the product code for ``tenant``."""
    ctx = EventContext(source="//lerian.fetcher/worker", exchange=EVENTS_EXCHANGE)
    event = failed_event(
        ctx, JOB_ID, '{"source":"payments"}', "failed to connect to datasource", AT, tenant=tenant
    )
    assert event.body == (
        b'{"job_id":"0190a1b2-0000-7000-8000-000000000001","status":"failed",'
        b'"metadata":{"source":"payments","error":{"message":"failed to connect to datasource"}}}'
    )
    return event


def test_event_signature_with_tenant_acme(keys: KeySet) -> None:
    event = _vector_event("acme")
    headers = signed_headers(keys, EVENTS_EXCHANGE, event, emitted_at=AT, t=1700000000)
    assert headers["x-message-signature"] == ACME_EVENT_SIGNATURE
    assert (headers["ce-tenantid"], headers["X-Tenant-ID"]) == ("acme", "acme")
    assert headers["t"] == "1700000000"


def test_event_signature_without_tenant_is_the_66_vector(keys: KeySet) -> None:
    headers = signed_headers(keys, EVENTS_EXCHANGE, _vector_event(""), emitted_at=AT, t=1700000000)
    assert headers["x-message-signature"] == SINGLE_EVENT_SIGNATURE
    assert headers["ce-tenantid"] == "single-tenant"
    assert "X-Tenant-ID" not in headers


def test_event_headers_as_built_carry_the_tenant() -> None:
    acme = _vector_event("acme").headers
    single = _vector_event("").headers
    assert (acme["ce-tenantid"], acme["X-Tenant-ID"]) == ("acme", "acme")
    assert single["ce-tenantid"] == "single-tenant"
    assert "X-Tenant-ID" not in single
    # Apart from the tenant, the eleven §8.4 headers are the same.
    assert {k: v for k, v in acme.items() if k not in ("ce-tenantid", "X-Tenant-ID")} == {
        k: v for k, v in single.items() if k != "ce-tenantid"
    }


@pytest.mark.parametrize(
    "tenant", ["Acme", "-acme", "_acme", "acme!", "a" * 64, "acme\n", " acme", "single tenant"]
)
def test_a_malformed_tenant_derives_no_key(keys: KeySet, tenant: str) -> None:
    assert not is_tenant_id(tenant)
    with pytest.raises(ValueError, match="tenant"):
        keys.for_tenant(tenant)


@pytest.mark.parametrize("tenant", ["a", "0", "a" * 63, "acme_2-b", "single-tenant"])
def test_pattern_accepts(tenant: str) -> None:
    assert is_tenant_id(tenant)


def test_a_key_set_without_its_master_has_no_tenant_keys(keys: KeySet) -> None:
    bare = KeySet(keys.credentials, keys.internal_hmac, keys.external_hmac, keys.storage)
    assert bare == keys  # the master is not part of the value
    assert bare.for_tenant("") is bare
    with pytest.raises(ValueError, match="master key"):
        bare.for_tenant("acme")


def test_tenant_keys_are_cached_and_the_cache_is_bounded(keys: KeySet) -> None:
    fresh = KeySet.from_master(bytes(keys.master or b""))
    first = fresh.for_tenant("acme")
    assert fresh.for_tenant("acme") is first
    for index in range(TENANT_CACHE_SIZE + 10):
        fresh.for_tenant(f"t{index}")
    assert len(fresh._tenants) == TENANT_CACHE_SIZE
    # acme was evicted (least recently used) and is derived again, to the same keys.
    again = fresh.for_tenant("acme")
    assert again is not first
    assert (again.external_hmac, again.storage) == (first.external_hmac, first.storage)


def test_repr_never_shows_tenant_or_master_key_bytes(keys: KeySet) -> None:
    acme = keys.for_tenant("acme")
    for text in (repr(keys), str(keys), repr(acme), repr(keys._tenants)):
        assert "0b5dcfb0" not in text
        assert "kV2R" not in text
        assert (keys.master or b"x").hex()[:16] not in text
