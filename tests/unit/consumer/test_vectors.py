"""§6.6, §8.5 and §12.6 vectors through the public consumer API only."""

from __future__ import annotations

from pathlib import Path

import pytest

from fetcher.consumer import (
    BadSignatureError,
    ConsumerKeys,
    IntegrityError,
    JobFailed,
    LocalFolderSource,
    ResultRef,
    TenantMismatchError,
    open_result,
    verify_event,
)
from tests.unit.consumer.conftest import EXCHANGE, MASTER_KEY, NOW, ce_headers, failed_body

EXTERNAL = "7fada934843cf2ac1b71dd13e1f06296c04bc538671c66c571ab606d2c28e8d7"
STORAGE = "381c26d1db0224dbe2755393c835fcc5b968e050659cae102ebfcb0779a2d777"
HMAC_OF_EMPTY = "81545b245bc1f37495819fc2afa806336436f7409fe320d1b787b79443de18e6"
ENCRYPTED_EMPTY = b"AAAAAAAAAAAAAAAA5Ic7+1PEf2OtmyRnzI653Xzs"
EVENT_SIGNATURE = "aeef9b589b34f8306ccb2833dfe6e37135011c4e69d0ff360f386b44e788e497"
TENANTS = {
    "acme": (
        "0b5dcfb07cc6607fdc334fa442c8dd5c42a4da50e592bb15abd28675b4bd211b",
        "bd147d917e899741617a3101824618d2a0464da70f0eb27225413aa7ec3e7465",
    ),
    "globex": (
        "0a234fd73d4d0293b803aa8d991bc05c6104227f6e5f17a5a5d0298a59dd4604",
        "67e526d7b7d069dbad51452ab8040b8563a94359d23792c8fe56816547422ed7",
    ),
}
ACME_HMAC_OF_EMPTY = "dc501f78bdc51a45c747778085edb784dee6b0129098afbcb57465d26b54d7e9"
ACME_ENCRYPTED_EMPTY = b"AAAAAAAAAAAAAAAAUbj4ULL6XVfjv5efWzfoLHQv"
ACME_EVENT_SIGNATURE = "34dd6c305cda3b961ff1692ac2c9fce48ac4f22db9fdfcba876b5ee52ad45a34"


def vector_headers(signature: str, tenant: str | None = None) -> dict[str, str]:
    headers = ce_headers("failed", tenant=tenant or "single-tenant")
    headers |= {"t": str(NOW), "signature-version": "v1", "x-message-signature": signature}
    if tenant is not None:
        headers["X-Tenant-ID"] = tenant
    return headers


def test_single_tenant_keys_are_the_66_vectors() -> None:
    keys = ConsumerKeys.from_master(MASTER_KEY)
    assert keys.external_hmac.hex() == EXTERNAL
    assert keys.storage is not None
    assert keys.storage.hex() == STORAGE
    assert keys.tenant_id == "single-tenant"
    line = ConsumerKeys.from_hex(
        external=f"External HMAC Key (hex): {EXTERNAL}", storage=f"Storage Key (hex): {STORAGE}"
    )
    assert line == keys


@pytest.mark.parametrize("tenant", sorted(TENANTS))
def test_per_tenant_keys_are_the_126_vectors(tenant: str) -> None:
    keys = ConsumerKeys.from_master(MASTER_KEY, tenant=tenant)
    assert (keys.external_hmac.hex(), keys.storage.hex() if keys.storage else None) == TENANTS[
        tenant
    ]
    assert keys.tenant_id == tenant


def test_keys_never_show_in_repr() -> None:
    keys = ConsumerKeys.from_master(MASTER_KEY, tenant="acme")
    assert TENANTS["acme"][0] not in repr(keys)
    assert TENANTS["acme"][0] not in str(keys)


def test_bad_tenant_id_is_refused() -> None:
    with pytest.raises(ValueError, match="tenant"):
        ConsumerKeys.from_master(MASTER_KEY, tenant="Acme")


def test_event_signature_vector_85_verifies() -> None:
    keys = ConsumerKeys.from_hex(external=EXTERNAL)
    event = verify_event(
        vector_headers(EVENT_SIGNATURE),
        failed_body(),
        exchange=EXCHANGE,
        routing_key="job.failed",
        keys=keys,
        now=NOW,
    )
    assert isinstance(event, JobFailed)
    assert event.error_message == "failed to connect to datasource"
    assert event.envelope.signed_at == NOW


def test_event_signature_vector_126_acme_verifies_only_with_acme_keys() -> None:
    acme = ConsumerKeys.from_master(MASTER_KEY, tenant="acme")
    headers = vector_headers(ACME_EVENT_SIGNATURE, tenant="acme")
    event = verify_event(
        headers, failed_body(), exchange=EXCHANGE, routing_key="job.failed", keys=acme, now=NOW
    )
    assert event.envelope.tenant_id == "acme"
    # globex's consumer refuses it (tenant), and a forged ce-tenantid does not help: the
    # signature is bound to the tenant line and the tenant's key.
    globex = ConsumerKeys.from_master(MASTER_KEY, tenant="globex")
    with pytest.raises(TenantMismatchError):
        verify_event(
            headers, failed_body(), exchange=EXCHANGE, routing_key="job.failed", keys=globex
        )
    forged = {**headers, "ce-tenantid": "globex", "X-Tenant-ID": "globex"}
    with pytest.raises(BadSignatureError):
        verify_event(
            forged, failed_body(), exchange=EXCHANGE, routing_key="job.failed", keys=globex, now=NOW
        )


async def test_storage_vector_66_opens_to_the_empty_document(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_bytes(ENCRYPTED_EMPTY)
    keys = ConsumerKeys.from_hex(external=EXTERNAL, storage=STORAGE)
    ref = ResultRef("r.json", HMAC_OF_EMPTY, size_bytes=2)
    with await open_result(ref, LocalFolderSource(tmp_path), keys) as result:
        assert b"".join(result.iter_bytes()) == b"{}"
        assert list(result.tables()) == []
        assert result.row_counts() == {}


async def test_storage_vector_126_acme_opens_only_with_acme_keys(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_bytes(ACME_ENCRYPTED_EMPTY)
    ref = ResultRef("r.json", ACME_HMAC_OF_EMPTY, size_bytes=2)
    acme = ConsumerKeys.from_master(MASTER_KEY, tenant="acme")
    with await open_result(ref, LocalFolderSource(tmp_path), acme) as result:
        assert b"".join(result.iter_bytes()) == b"{}"
    for other in (
        ConsumerKeys.from_master(MASTER_KEY),
        ConsumerKeys.from_master(MASTER_KEY, tenant="globex"),
    ):
        with pytest.raises(IntegrityError):
            await open_result(ref, LocalFolderSource(tmp_path), other)
