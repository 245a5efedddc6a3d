"""§14.3 ``rotate-credentials`` over the SQLite metadata store: every tenant's rows (deleted
ones too) move to the current key and version; a row already current is untouched; a row whose
version has no key is counted as failed and left as it was; a row changed between the read and
the compare-and-set is left to the writer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.crypto import KeySet
from fetcher.services.connections.credentials import CredentialCipher
from fetcher.services.connections.rekey import RekeyReport, rekey_credentials
from tests.unit.store.store_contract import T0, connection

OLD = KeySet.from_text("kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8=")
NEW = KeySet.from_text("AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=")
BEFORE = CredentialCipher("1", OLD)
AFTER = CredentialCipher("2", NEW, {"1": OLD})


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMetadataStore]:
    async with SqliteMetadataStore(tmp_path / "metadata.db") as opened:
        await opened.migrate()
        yield opened


async def _stored(
    store: SqliteMetadataStore, name: str, tenant: str, cipher: CredentialCipher
) -> str:
    record = connection(name)
    record = replace(
        record,
        tenant=tenant,
        password_encrypted=cipher.encrypt(f"pw-{name}", record.id),
        ssl_key_encrypted=cipher.encrypt(f"key-{name}", record.id),
        encryption_key_version=cipher.version,
    )
    await store.insert_connection(record)
    return record.id


async def test_every_tenant_moves_to_the_current_key(store: SqliteMetadataStore) -> None:
    ids = {name: await _stored(store, name, tenant, BEFORE) for name, tenant in
           (("a", ""), ("b", "acme"), ("gone", ""))}  # fmt: skip
    current = await _stored(store, "c", "", AFTER)
    assert await store.soft_delete_connection(ids["gone"], T0, tenant="")
    orphan = replace(connection("orphan"), encryption_key_version="9")
    await store.insert_connection(orphan)
    assert await rekey_credentials(store, AFTER) == RekeyReport(rekeyed=3, raced=0, failed=1)
    for name, tenant in (("a", ""), ("b", "acme"), ("c", "")):
        row = await store.get_connection_by_name(name, tenant=tenant)
        assert row is not None
        assert row.encryption_key_version == "2"
        assert row.password_encrypted is not None
        assert row.ssl_key_encrypted is not None
        assert AFTER.decrypt(row.password_encrypted, row.id, "2") == f"pw-{name}"
        assert (
            CredentialCipher("2", NEW).decrypt(row.ssl_key_encrypted, row.id, "2") == f"key-{name}"
        )
    assert (await store.get_connection(current, tenant="")) is not None
    kept = await store.get_connection(orphan.id, tenant="")
    assert kept is not None
    assert (kept.encryption_key_version, kept.password_encrypted) == (
        "9",
        orphan.password_encrypted,
    )
    assert await rekey_credentials(store, AFTER) == RekeyReport(rekeyed=0, raced=0, failed=1)


async def test_a_row_changed_meanwhile_is_left_to_its_writer(store: SqliteMetadataStore) -> None:
    cid = await _stored(store, "a", "", BEFORE)
    (read,) = await store.connections_under_other_keys("2", after_id="", limit=10)
    patched = await store.get_connection(cid, tenant="")
    assert patched is not None
    fresh = AFTER.encrypt("patched", cid)
    assert await store.update_connection(
        replace(patched, password_encrypted=fresh, encryption_key_version="2")
    )
    assert not await store.rekey_connection(
        read, password_encrypted="x", ssl_key_encrypted=None, version="2"
    )
    row = await store.get_connection(cid, tenant="")
    assert row is not None
    assert row.password_encrypted == fresh
