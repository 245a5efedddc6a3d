"""What a rollback may do (docs/upgrades.md, contract §15.4).

* Every shipped migration is classified in the rollback table of docs/upgrades.md, and the
  contract's summary agrees with it.
* Rolling back to the previous release means its processes run on this release's schema, so
  its writes (the inserts of :mod:`tests.previous_release`) must still work on the head schema
  and this release must read what they wrote. This holds while every migration added since
  the previous release only adds; a migration that does not only add makes it fail, and must
  then be marked "No" in the table, which tells operators to restore a backup instead.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from fetcher.adapters.store._common import load_migrations
from fetcher.adapters.store._sql_store import SqlMetadataStore
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.crypto import KeySet, parse_master_key
from fetcher.services.connections.credentials import CredentialCipher
from fetcher.services.records import ConnectionQuery
from tests.previous_release import OLD_FAILURE, OldRows, write_sqlite

ROOT = Path(__file__).resolve().parents[3]
MASTER_KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
_ROW = re.compile(r"^\| `(\d{4}_[a-z0-9_]+)` \|[^|]*\| (Yes|No|n/a) \|", re.MULTILINE)


def rollback_table() -> dict[str, str]:
    return dict(_ROW.findall((ROOT / "docs" / "upgrades.md").read_text(encoding="utf-8")))


def test_every_shipped_migration_is_classified_for_rollback() -> None:
    for backend in ("postgres", "sqlite"):
        shipped = [m.name.removesuffix(".sql") for m in load_migrations(backend)]
        assert list(rollback_table()) == shipped


def test_the_contract_names_the_same_migrations_as_only_adding() -> None:
    contract = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    section = contract.split("### 15.4 ", 1)[1].split("\n## ", 1)[0]
    adding = sorted(name for name, adds in rollback_table().items() if adds == "Yes")
    assert f"{' and '.join(f'`{n}`' for n in adding)} only add" in section
    for name in (n for n, adds in rollback_table().items() if adds == "No"):
        assert f"`{name}` does not only add" in section


async def assert_served(full: SqlMetadataStore, old: OldRows) -> None:
    """This release reads every row the previous release wrote."""
    status = await full.migration_status()
    assert status.pending == ()
    statuses = {}
    for job_id in (old.pending, old.queued, old.processing, old.completed, old.failed):
        job = await full.get_job(job_id, tenant="")
        assert job is not None
        statuses[job_id] = job.status
    assert statuses == {
        old.pending: "pending",
        old.queued: "pending",
        old.processing: "processing",
        old.completed: "completed",
        old.failed: "failed",
    }
    failed = await full.get_job(old.failed, tenant="")
    assert failed is not None
    assert failed.error == OLD_FAILURE
    records, total = await full.list_connections(ConnectionQuery(), tenant="")
    assert total == 3
    assert {r.id for r in records} == old.live_connections
    assert await full.get_connection(old.deleted_connection, tenant="") is None
    cipher = CredentialCipher("1", KeySet.from_master(parse_master_key(MASTER_KEY)))
    stored = await full.get_connection(old.pg_connection, tenant="")
    assert stored is not None
    assert stored.password_encrypted is not None
    decrypted = cipher.decrypt(stored.password_encrypted, stored.id, "1")
    assert decrypted == old.password
    assert await full.count_unsent() == 1
    await full.assign_feed_seq()
    feed = await full.read_feed(after=0, limit=10, tenant="", products=None)
    assert [(row.job_id, row.event_type) for row in feed] == [
        (old.completed, "completed"),
        (old.failed, "failed"),
    ]


def previous_release_kwargs() -> dict[str, object]:
    return {
        "master_key": MASTER_KEY,
        "source_host": "127.0.0.1",
        "source_port": 5432,
        "source_database": "ledger",
        "pending_age": timedelta(seconds=5),
        "processing_age": timedelta(minutes=1),
        "head": True,
    }


async def test_the_previous_release_writes_on_this_schema_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "meta.db"
    old = write_sqlite(path, **previous_release_kwargs())
    async with SqliteMetadataStore(str(path)) as store:
        assert await store.migrate() == []
        await assert_served(store, old)
