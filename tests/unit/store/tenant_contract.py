"""Tenant isolation every MetadataStore must show (contract §12.4, §12.5).

Every request-side read and write by ID sees only its tenant's rows: another tenant's row is
absent. ``configName`` and the §3.8 active-hash guard are unique per tenant, the outbox row
takes its job's tenant and product, and the feed of a product-restricted token holds only its
products' events. Backends mix :class:`TenantContract` into their store test class, with the
same ``store`` fixture as :class:`~tests.unit.store.store_contract.StoreContract`.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from fetcher.bootstrap import MetadataStore
from fetcher.services.records import ConnectionQuery, EventType, JobRecord
from fetcher.services.store_roles import ActiveDuplicateError, ConflictError
from tests.unit.store.store_contract import MS, T0, complete, connection, event, job

ACME = "acme"
GLOBEX = "globex"


def tenant_job(
    tenant: str, request_hash: str = "h1", *, source: str = "payments", sub: str | None = None
) -> JobRecord:
    return replace(
        job(request_hash),
        tenant=tenant,
        created_by=sub,
        metadata_json=f'{{"source":"{source}"}}',
    )


async def completed_job(store: MetadataStore, record: JobRecord) -> None:
    await store.insert_job(record)
    assert await store.claim_job(record.id, T0 + MS)
    assert await complete(store, record.id)
    await store.assign_feed_seq()


class TenantContract:
    """Backend-independent tenant isolation of the metadata store port."""

    # -- connections -----------------------------------------------------------------------

    async def test_tenant_and_created_by_round_trip(self, store: MetadataStore) -> None:
        record = replace(connection("pg_main"), tenant=ACME, created_by="alice")
        await store.insert_connection(record)
        assert await store.get_connection(record.id, tenant=ACME) == record
        assert await store.get_connection_by_name("pg_main", tenant=ACME) == record

    async def test_another_tenants_connection_is_absent(self, store: MetadataStore) -> None:
        record = replace(connection("pg_main"), tenant=ACME)
        await store.insert_connection(record)
        for tenant in (GLOBEX, ""):
            assert await store.get_connection(record.id, tenant=tenant) is None
            assert await store.get_connection_by_name("pg_main", tenant=tenant) is None
            assert await store.list_connections(ConnectionQuery(), tenant=tenant) == ([], 0)

    async def test_config_name_is_unique_per_tenant(self, store: MetadataStore) -> None:
        for tenant in (ACME, GLOBEX, ""):
            await store.insert_connection(replace(connection("pg_main"), tenant=tenant))
        with pytest.raises(ConflictError):
            await store.insert_connection(replace(connection("pg_main"), tenant=ACME))
        other = replace(connection("pg_other"), tenant=GLOBEX)
        await store.insert_connection(other)
        with pytest.raises(ConflictError):  # a rename into a taken name of the same tenant
            await store.update_connection(replace(other, config_name="pg_main"))
        for tenant in (ACME, GLOBEX, ""):
            found = await store.get_connection_by_name("pg_main", tenant=tenant)
            assert found is not None
            assert found.tenant == tenant

    async def test_lists_and_totals_see_only_the_tenant(self, store: MetadataStore) -> None:
        for i in range(3):
            stamp = T0 + i * MS
            await store.insert_connection(
                replace(connection(f"a{i}", created=stamp, product="payments"), tenant=ACME)
            )
        await store.insert_connection(replace(connection("g0", product="payments"), tenant=GLOBEX))
        await store.insert_connection(replace(connection("g1"), tenant=GLOBEX))
        items, total = await store.list_connections(ConnectionQuery(limit=2), tenant=ACME)
        assert (total, [r.config_name for r in items]) == (3, ["a2", "a1"])
        payments = ConnectionQuery(product="payments")
        items, total = await store.list_connections(payments, tenant=GLOBEX)
        assert (total, [r.config_name for r in items]) == (1, ["g0"])
        unassigned = ConnectionQuery(unassigned_only=True)
        items, total = await store.list_connections(unassigned, tenant=GLOBEX)
        assert (total, [r.config_name for r in items]) == (1, ["g1"])
        assert await store.list_connections(unassigned, tenant=ACME) == ([], 0)

    async def test_list_by_a_set_of_products(self, store: MetadataStore) -> None:
        for name, product in (("a", "payments"), ("b", "billing"), ("c", None), ("d", "crm")):
            await store.insert_connection(connection(name, product=product))
        query = ConnectionQuery(products=frozenset({"payments", "crm"}), sort="asc")
        items, total = await store.list_connections(query, tenant="")
        assert (total, sorted(r.config_name for r in items)) == (2, ["a", "d"])
        none = ConnectionQuery(products=frozenset())
        assert await store.list_connections(none, tenant="") == ([], 0)

    async def test_writes_by_id_never_touch_another_tenant(self, store: MetadataStore) -> None:
        record = replace(connection("pg_main"), tenant=ACME)
        await store.insert_connection(record)
        now = T0 + MS
        foreign = replace(record, tenant=GLOBEX, host="evil.example.com", updated_at=now)
        assert not await store.update_connection(foreign)
        assert not await store.soft_delete_connection(record.id, now, tenant=GLOBEX)
        assert not await store.assign_product(record.id, "payments", now, tenant=GLOBEX)
        assert not await store.soft_delete_connection(record.id, now, tenant="")
        assert await store.get_connection(record.id, tenant=ACME) == record
        assert await store.assign_product(record.id, "payments", now, tenant=ACME)
        assert await store.soft_delete_connection(record.id, now, tenant=ACME)
        assert await store.get_connection(record.id, tenant=ACME) is None

    async def test_update_keeps_tenant_and_created_by(self, store: MetadataStore) -> None:
        record = replace(connection("pg_main"), tenant=ACME, created_by="alice")
        await store.insert_connection(record)
        changed = replace(record, created_by="mallory", host="db2.example.com")
        assert await store.update_connection(changed)
        stored = await store.get_connection(record.id, tenant=ACME)
        assert stored is not None
        assert (stored.host, stored.created_by, stored.tenant) == (
            "db2.example.com",
            "alice",
            ACME,
        )

    async def test_active_jobs_are_per_tenant(self, store: MetadataStore) -> None:
        await store.insert_job(tenant_job(ACME))
        assert await store.has_active_jobs("pg_main", tenant=ACME)
        assert not await store.has_active_jobs("pg_main", tenant=GLOBEX)
        assert not await store.has_active_jobs("pg_main", tenant="")

    # -- jobs ------------------------------------------------------------------------------

    async def test_jobs_are_read_within_their_tenant(self, store: MetadataStore) -> None:
        record = tenant_job(ACME, sub="alice")
        await store.insert_job(record)
        assert await store.get_job(record.id, tenant=ACME) == record
        assert await store.get_job(record.id, tenant=GLOBEX) is None
        assert await store.get_job(record.id, tenant="") is None

    async def test_dedup_match_and_guard_are_per_tenant(self, store: MetadataStore) -> None:
        acme, globex, single = tenant_job(ACME), tenant_job(GLOBEX), tenant_job("")
        await asyncio.gather(*(store.insert_job(r) for r in (acme, globex, single)))
        with pytest.raises(ActiveDuplicateError):
            await store.insert_job(tenant_job(ACME))
        since = T0 - 5 * MS
        for record in (acme, globex, single):
            found = await store.find_dedup_match("h1", since, tenant=record.tenant)
            assert found is not None
            assert found.id == record.id
        assert await store.find_dedup_match("h1", since, tenant="initech") is None

    # -- outbox and feed -------------------------------------------------------------------

    async def test_outbox_rows_take_their_jobs_tenant(self, store: MetadataStore) -> None:
        acme, single = tenant_job(ACME, "a"), tenant_job("", "s")
        await completed_job(store, acme)
        await completed_job(store, single)
        async with store.claim_unsent(created_before=T0 + 2 * MS, limit=10) as batch:
            tenants = {row.job_id: row.tenant for row in batch.rows}
        assert tenants == {acme.id: ACME, single.id: ""}

    async def test_feed_is_per_tenant_with_a_global_sequence(self, store: MetadataStore) -> None:
        records = [tenant_job(t, f"h{i}") for i, t in enumerate((ACME, GLOBEX, ACME, ""))]
        for record in records:
            await completed_job(store, record)
        acme = await store.read_feed(after=0, limit=10, tenant=ACME, products=None)
        assert [r.job_id for r in acme] == [records[0].id, records[2].id]
        assert [r.feed_seq for r in acme] == [1, 3]  # a tenant's cursors have gaps
        assert {r.tenant for r in acme} == {ACME}
        globex = await store.read_feed(after=0, limit=10, tenant=GLOBEX, products=None)
        assert [(r.job_id, r.feed_seq) for r in globex] == [(records[1].id, 2)]
        single = await store.read_feed(after=0, limit=10, tenant="", products=None)
        assert [r.job_id for r in single] == [records[3].id]
        later = await store.read_feed(after=1, limit=10, tenant=ACME, products=None)
        assert [r.job_id for r in later] == [records[2].id]

    async def test_feed_of_a_product_restricted_token(self, store: MetadataStore) -> None:
        sources = ("payments", "  Billing ", "crm", "payments")
        records = [tenant_job(ACME, f"h{i}", source=s) for i, s in enumerate(sources)]
        for record in records:
            await completed_job(store, record)

        async def read(
            products: frozenset[str] | None, event_type: EventType | None = None
        ) -> list[str]:
            rows = await store.read_feed(
                after=0, limit=10, event_type=event_type, tenant=ACME, products=products
            )
            return [r.job_id for r in rows]

        ids = [r.id for r in records]
        assert await read(frozenset({"payments"})) == [ids[0], ids[3]]
        assert await read(frozenset({"billing", "crm"})) == [ids[1], ids[2]]
        assert await read(frozenset()) == []
        assert await read(None) == ids
        assert await read(frozenset({"payments"}), event_type="failed") == []
        assert (
            await store.read_feed(
                after=0, limit=10, tenant=GLOBEX, products=frozenset({"payments"})
            )
            == []
        )

    async def test_failed_job_event_takes_its_tenant(self, store: MetadataStore) -> None:
        record = tenant_job(GLOBEX, source="crm")
        await store.insert_job(record)
        failed = event(record.id, "failed", T0 + MS)
        assert await store.fail_job(
            record.id,
            from_statuses=("pending",),
            error="boom",
            completed_at=T0 + MS,
            event=failed,
        )
        await store.assign_feed_seq()
        rows = await store.read_feed(after=0, limit=10, tenant=GLOBEX, products=frozenset({"crm"}))
        assert [(r.job_id, r.event_type, r.tenant) for r in rows] == [(record.id, "failed", GLOBEX)]
