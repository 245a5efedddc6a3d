"""The behaviour every MetadataStore must show (contract §2.6, §3.8, §4, §4.7, §8.6, §2.12).

Backends subclass :class:`StoreContract` and provide a ``store`` fixture yielding an opened,
migrated, empty store. The class name does not start with ``Test``, so pytest collects it only
through those subclasses.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fetcher.bootstrap import MetadataStore
from fetcher.services.records import (
    ConnectionQuery,
    ConnectionRecord,
    EventType,
    JobRecord,
    JobStatus,
    MetadataValue,
    OutboxEvent,
)
from fetcher.services.store_roles import ActiveDuplicateError, Backlog, ConflictError

T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
MS = timedelta(milliseconds=1)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
MAPPED = '{"pg_main":{"public.accounts":["id","email"]}}'


def new_id() -> str:
    return str(uuid.uuid4())


def connection(
    name: str,
    *,
    created: datetime = T0,
    cid: str | None = None,
    product: str | None = None,
    type_: str = "POSTGRESQL",
    metadata: dict[str, str | int | float | bool | None] | None = None,
) -> ConnectionRecord:
    return ConnectionRecord(
        id=cid or new_id(),
        config_name=name,
        type=type_,
        database_name="ledger",
        created_at=created,
        updated_at=created,
        product_name=product,
        host="db.example.com",
        port=5432,
        user_name="reader",
        password_encrypted="c2VjcmV0LXBhc3N3b3Jk",
        metadata=metadata or {},
    )


def job(
    request_hash: str = "h1",
    *,
    status: JobStatus = "pending",
    created: datetime = T0,
    mapped: str = MAPPED,
    limits: str | None = None,
    started: datetime | None = None,
) -> JobRecord:
    return JobRecord(
        id=new_id(),
        status=status,
        request_hash=request_hash,
        dedup_active=status in ("pending", "processing"),
        mapped_fields_json=mapped,
        metadata_json='{"source":"payments"}',
        limits_json=limits,
        connection_ids={"pg_main": new_id()},
        created_at=created,
        updated_at=created,
        started_at=started,
    )


def event(job_id: str, kind: EventType = "completed", at: datetime = T0) -> OutboxEvent:
    body = json.dumps({"job_id": job_id, "status": kind}, separators=(",", ":")).encode()
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"
    headers = {
        "ce-specversion": "1.0",
        "ce-id": f"fetcher.job.{kind}.{job_id}",
        "ce-source": "//lerian.fetcher/worker",
        "ce-type": f"studio.lerian.job.{kind}",
        "ce-time": stamp,
        "ce-subject": job_id,
        "ce-resourcetype": "job",
        "ce-eventtype": kind,
        "ce-schemaversion": "2.0.0",
        "ce-datacontenttype": "application/json",
        "ce-tenantid": "single-tenant",
    }
    return OutboxEvent(
        ce_id=headers["ce-id"],
        job_id=job_id,
        event_type=kind,
        routing_key=f"job.{kind}",
        body=body,
        headers=headers,
        created_at=at,
    )


async def processing_job(store: MetadataStore, request_hash: str = "h1") -> JobRecord:
    record = job(request_hash)
    await store.insert_job(record)
    assert await store.claim_job(record.id, T0 + MS)
    return record


async def complete(store: MetadataStore, job_id: str, at: datetime = T0) -> bool:
    return await store.complete_job(
        job_id,
        result_path=f"external-data/{job_id}.json",
        result_hmac="9f1c",
        completed_at=at,
        event=event(job_id, "completed", at),
    )


class StoreContract:
    """Backend-independent behaviour of the metadata store port."""

    # -- lifecycle -------------------------------------------------------------------------

    async def test_migrate_twice_is_idempotent(self, store: MetadataStore) -> None:
        await store.migrate()
        await store.migrate()
        await store.ping()
        await store.insert_connection(connection("after_migrate"))
        assert await store.get_connection_by_name("after_migrate", tenant="") is not None

    async def test_process_lock_is_granted(self, store: MetadataStore) -> None:
        assert await store.acquire_process_lock()

    async def test_naive_timestamps_are_refused(self, store: MetadataStore) -> None:
        with pytest.raises(ValueError, match="timezone-aware"):
            await store.insert_connection(connection("naive", created=T0.replace(tzinfo=None)))

    # -- connections -----------------------------------------------------------------------

    async def test_connection_round_trips(self, store: MetadataStore) -> None:
        created = T0.replace(microsecond=678999)
        record = ConnectionRecord(
            id=new_id(),
            config_name="pg_main",
            type="POSTGRESQL",
            database_name="ledger",
            created_at=created,
            updated_at=created,
            product_name="payments",
            host="db.example.com",
            port=5432,
            schema="accounting",
            user_name="reader",
            password_encrypted="cGFzc3dvcmQtc2VudGluZWw=",
            ssl_mode="require",
            ssl_ca="-----BEGIN CERTIFICATE-----",
            ssl_cert="-----BEGIN CERTIFICATE-----",
            ssl_key_encrypted="a2V5LXNlbnRpbmVs",
            encryption_key_version="2",
            metadata={"zeta": "z", "alpha": 1.5, "flag": True, "none": None, "n": 10},
        )
        await store.insert_connection(record)
        got = await store.get_connection(record.id, tenant="")
        assert got is not None
        assert got.created_at == T0  # truncated to milliseconds
        assert got == replace(record, created_at=T0, updated_at=T0)
        assert list(got.metadata) == ["zeta", "alpha", "flag", "none", "n"]
        assert "cGFzc3dvcmQtc2VudGluZWw=" not in repr(got)
        assert "a2V5LXNlbnRpbmVs" not in repr(got)
        assert await store.get_connection_by_name("pg_main", tenant="") == got
        assert await store.get_connection_by_name("PG_MAIN", tenant="") is None
        assert await store.get_connection(new_id(), tenant="") is None

    async def test_config_name_unique_and_freed_by_soft_delete(self, store: MetadataStore) -> None:
        first = connection("shared")
        await store.insert_connection(first)
        with pytest.raises(ConflictError):
            await store.insert_connection(connection("shared"))
        assert await store.soft_delete_connection(first.id, T0 + MS, tenant="")
        assert not await store.soft_delete_connection(first.id, T0 + MS, tenant="")
        assert await store.get_connection(first.id, tenant="") is None
        assert await store.get_connection_by_name("shared", tenant="") is None
        second = connection("shared")
        await store.insert_connection(second)
        got = await store.get_connection_by_name("shared", tenant="")
        assert got is not None
        assert got.id == second.id

    async def test_concurrent_inserts_with_one_name(self, store: MetadataStore) -> None:
        outcomes = await asyncio.gather(
            *(store.insert_connection(connection("race")) for _ in range(8)),
            return_exceptions=True,
        )
        assert sum(o is None for o in outcomes) == 1
        assert all(isinstance(o, ConflictError) for o in outcomes if o is not None)

    async def test_update_connection(self, store: MetadataStore) -> None:
        record = connection("before", product="payments", metadata={"a": "1"})
        other = connection("taken")
        await store.insert_connection(record)
        await store.insert_connection(other)
        changed = replace(
            record,
            config_name="after",
            product_name="ignored",
            host=None,
            metadata={},
            updated_at=T0 + MS,
        )
        assert await store.update_connection(changed)
        got = await store.get_connection(record.id, tenant="")
        assert got is not None
        assert (got.config_name, got.product_name, got.host, got.metadata) == (
            "after",
            "payments",
            None,
            {},
        )
        assert (got.created_at, got.updated_at) == (T0, T0 + MS)
        taken = replace(changed, config_name="taken")
        with pytest.raises(ConflictError):
            await store.update_connection(taken)
        await store.soft_delete_connection(other.id, T0, tenant="")
        assert await store.update_connection(taken)
        assert await store.soft_delete_connection(record.id, T0, tenant="")
        assert not await store.update_connection(taken)

    async def test_assign_product_only_once(self, store: MetadataStore) -> None:
        record = connection("assignable")
        await store.insert_connection(record)
        results = await asyncio.gather(
            *(store.assign_product(record.id, f"p{i}", T0 + MS, tenant="") for i in range(5))
        )
        assert sorted(results) == [False, False, False, False, True]
        got = await store.get_connection(record.id, tenant="")
        assert got is not None
        assert got.product_name == f"p{results.index(True)}"
        assert got.updated_at == T0 + MS
        assert not await store.assign_product(new_id(), "p", T0, tenant="")

    async def test_list_sorts_by_created_then_id_and_paginates(self, store: MetadataStore) -> None:
        ids = [f"0190{i:04d}-0000-7000-8000-000000000000" for i in range(5)]
        times = [T0, T0 + MS, T0 + MS, T0 + 2 * MS, T0 + 3 * MS]
        for i in (3, 0, 4, 2, 1):
            await store.insert_connection(connection(f"conn_{i}", cid=ids[i], created=times[i]))
        items, total = await store.list_connections(
            ConnectionQuery(limit=10, sort="asc"), tenant=""
        )
        assert total == 5
        assert [c.id for c in items] == ids
        items, total = await store.list_connections(ConnectionQuery(limit=10), tenant="")
        assert [c.id for c in items] == ids[::-1]
        page, total = await store.list_connections(
            ConnectionQuery(offset=2, limit=2, sort="asc"), tenant=""
        )
        assert ([c.id for c in page], total) == (ids[2:4], 5)
        empty, total = await store.list_connections(ConnectionQuery(offset=10, limit=2), tenant="")
        assert (empty, total) == ([], 5)

    async def test_list_leaves_large_documents_in_the_store(self, store: MetadataStore) -> None:
        """Issue 33: metadata over ``max_document_bytes`` is cut (and named), a TLS text over
        it kept only as present; the same connection is whole when read by ID."""
        big: dict[str, MetadataValue] = {f"k{i}": "é" * 1000 for i in range(3)}  # ~6 KB
        small: dict[str, MetadataValue] = {"serviceName": "ORCL"}
        pem = "-----BEGIN CERTIFICATE-----" + "A" * 8000
        large = replace(connection("large", metadata=big), ssl_mode="require", ssl_ca=pem)
        await store.insert_connection(large)
        await store.insert_connection(connection("small", metadata=small, created=T0 + MS))
        items, _ = await store.list_connections(ConnectionQuery(sort="asc"), tenant="")
        listed = {c.config_name: c for c in items}
        assert (listed["large"].cut, listed["large"].metadata) == (("metadata",), {})
        assert listed["large"].ssl_ca
        assert len(listed["large"].ssl_ca) < 100
        assert (listed["small"].cut, listed["small"].metadata) == ((), small)
        whole = await store.get_connection(large.id, tenant="")
        assert whole is not None
        assert (whole.metadata, whole.ssl_ca, whole.cut) == (big, pem, ())
        exact = ConnectionQuery(sort="asc", max_document_bytes=len(pem.encode()))
        items, _ = await store.list_connections(exact, tenant="")
        assert items[0].ssl_ca == pem

    async def test_list_filters(self, store: MetadataStore) -> None:
        day = timedelta(days=1)
        rows = [
            connection("a_pg", product="payments", created=T0),
            connection("b_my", product="payments", type_="MYSQL", created=T0 + day),
            connection("c_pg", created=T0 + 2 * day),
            connection("d_pg", product="ledger", created=T0 + 3 * day),
        ]
        for row in rows:
            await store.insert_connection(row)
        await store.soft_delete_connection(rows[3].id, T0, tenant="")

        async def names(**kwargs: object) -> list[str]:
            items, total = await store.list_connections(
                ConnectionQuery(limit=100, sort="asc", **kwargs),  # type: ignore[arg-type]
                tenant="",
            )
            assert total == len(items)
            return [c.config_name for c in items]

        assert await names() == ["a_pg", "b_my", "c_pg"]
        assert await names(type="postgresql") == ["a_pg", "c_pg"]
        assert await names(type="MySql") == ["b_my"]
        assert await names(type="postgreſql") == []
        assert await names(product="payments") == ["a_pg", "b_my"]
        assert await names(unassigned_only=True) == ["c_pg"]
        assert await names(created_from=T0 + day) == ["b_my", "c_pg"]
        assert await names(created_before=T0 + day) == ["a_pg"]
        window = {"created_from": T0 + day, "created_before": T0 + day + MS}
        assert await names(**window) == ["b_my"]

    async def test_list_metadata_equality_by_json_text(self, store: MetadataStore) -> None:
        meta: dict[str, str | int | float | bool | None] = {
            "team": "core",
            "n": 10,
            "ratio": 1.5,
            "on": True,
            "off": False,
            "nothing": None,
            "text_true": "true",
        }
        await store.insert_connection(connection("with_meta", metadata=meta))
        await store.insert_connection(connection("other_meta", metadata={"team": "edge"}))

        async def count(*pairs: tuple[str, str]) -> int:
            return (await store.list_connections(ConnectionQuery(metadata=pairs), tenant=""))[1]

        assert await count(("team", "core")) == 1
        assert await count(("n", "10")) == 1
        assert await count(("n", "10.0")) == 0
        assert await count(("ratio", "1.5")) == 1
        assert await count(("on", "true")) == 1
        assert await count(("off", "false")) == 1
        assert await count(("on", "True")) == 0
        assert await count(("text_true", "true")) == 1
        assert await count(("nothing", "null")) == 0
        assert await count(("nothing", "")) == 0
        assert await count(("missing", "x")) == 0
        assert await count(("team", "core"), ("n", "10")) == 1
        assert await count(("team", "core"), ("n", "11")) == 0

    async def test_has_active_jobs(self, store: MetadataStore) -> None:
        assert not await store.has_active_jobs("pg_main", tenant="")
        record = job(mapped='{"pg_main":{"t":["a"]},"mongo":{"c":["x"]}}')
        await store.insert_job(record)
        assert await store.has_active_jobs("pg_main", tenant="")
        assert await store.has_active_jobs("mongo", tenant="")
        assert not await store.has_active_jobs("PG_MAIN", tenant="")
        assert await store.claim_job(record.id, T0)
        assert await store.has_active_jobs("mongo", tenant="")
        assert await complete(store, record.id)
        assert not await store.has_active_jobs("pg_main", tenant="")

    # -- jobs ------------------------------------------------------------------------------

    async def test_json_documents_round_trip_verbatim(self, store: MetadataStore) -> None:
        text = '{"b":1.10,"a":1}'
        record = replace(
            job(),
            mapped_fields_json='{"z":{"t":["b","a","b"]},"a":{"t":["x"]}}',
            filters_json=text,
            limits_json='{"timeoutSeconds":30,"maxRows":1e3}',
            metadata_json='{"source":"p","n":1.10, "é":"ü"}',
            connection_ids={"z": "id-z", "a": "id-a"},
            request_id="req-1",
        )
        await store.insert_job(record)
        got = await store.get_job(record.id, tenant="")
        assert got == record
        assert got is not None
        assert got.filters_json == text
        assert list(got.connection_ids) == ["z", "a"]
        assert await store.get_job(new_id(), tenant="") is None

    async def test_dedup_match_rules(self, store: MetadataStore) -> None:
        old = T0 - timedelta(days=30)
        failed = job("h", created=T0)
        await store.insert_job(failed)
        await store.fail_job(
            failed.id,
            from_statuses=["pending"],
            error="x",
            completed_at=T0,
            event=event(failed.id, "failed"),
        )
        assert await store.find_dedup_match("h", T0 - MS, tenant="") is None

        done = job("h", created=T0)
        await store.insert_job(done)
        await store.claim_job(done.id, T0)
        await complete(store, done.id)
        match = await store.find_dedup_match("h", T0, tenant="")
        assert match is not None
        assert match.id == done.id
        assert await store.find_dedup_match("h", T0 + MS, tenant="") is None

        active = job("h", created=old)
        await store.insert_job(active)
        match = await store.find_dedup_match("h", T0 + MS, tenant="")
        assert match is not None
        assert match.id == active.id
        match = await store.find_dedup_match("h", T0, tenant="")  # the newest eligible one wins
        assert match is not None
        assert match.id == done.id
        assert await store.find_dedup_match("other", old, tenant="") is None

    async def test_active_hash_guard_under_concurrency(self, store: MetadataStore) -> None:
        records = [job("same") for _ in range(20)]
        outcomes = await asyncio.gather(
            *(store.insert_job(r) for r in records), return_exceptions=True
        )
        winners = [r for r, o in zip(records, outcomes, strict=True) if o is None]
        assert len(winners) == 1
        assert all(isinstance(o, ActiveDuplicateError) for o in outcomes if o is not None)
        match = await store.find_dedup_match("same", T0, tenant="")
        assert match is not None
        assert match.id == winners[0].id
        losers = [await store.get_job(r.id, tenant="") for r in records if r is not winners[0]]
        assert losers == [None] * 19

    async def test_hash_is_free_again_after_a_terminal_state(self, store: MetadataStore) -> None:
        first = await processing_job(store, "again")
        with pytest.raises(ActiveDuplicateError):
            await store.insert_job(job("again"))
        await complete(store, first.id)
        done = job("again", status="completed")
        await store.insert_job(done)  # inactive rows never collide
        second = job("again")
        await store.insert_job(second)
        got = await store.get_job(first.id, tenant="")
        assert got is not None
        assert not got.dedup_active

    async def test_claim_is_a_cas_that_succeeds_once(self, store: MetadataStore) -> None:
        record = job()
        await store.insert_job(record)
        results = await asyncio.gather(*(store.claim_job(record.id, T0 + MS) for _ in range(10)))
        assert results.count(True) == 1
        got = await store.get_job(record.id, tenant="")
        assert got is not None
        assert (got.status, got.started_at, got.updated_at) == ("processing", T0 + MS, T0 + MS)
        assert got.dedup_active
        assert not await store.claim_job(record.id, T0)
        assert not await store.claim_job(new_id(), T0)

    async def test_complete_records_the_result_summary_and_key_version(
        self, store: MetadataStore
    ) -> None:
        """§14.1, §14.3: written by the completion CAS itself, read back byte for byte."""
        record = job()
        await store.insert_job(record)
        await store.claim_job(record.id, T0)
        summary = '{"sizeBytes":44,"plaintextBytes":2,"rowCount":0,"tables":{}}'
        assert await store.complete_job(
            record.id,
            result_path="k",
            result_hmac="9f1c",
            completed_at=T0 + MS,
            event=event(record.id, "completed", T0 + MS),
            result_summary_json=summary,
            result_key_version="v2",
        )
        got = await store.get_job(record.id, tenant="")
        assert got is not None
        assert (got.result_summary_json, got.result_key_version) == (summary, "v2")
        untouched = job("h2")
        await store.insert_job(untouched)
        plain = await store.get_job(untouched.id, tenant="")
        assert plain is not None
        assert (plain.result_summary_json, plain.result_key_version) == (None, None)

    async def test_complete_writes_its_event_once(self, store: MetadataStore) -> None:
        record = job()
        await store.insert_job(record)
        assert not await complete(store, record.id)  # still pending: CAS fails
        assert await store.count_unsent() == 0
        await store.claim_job(record.id, T0)
        assert await complete(store, record.id, T0 + MS)
        got = await store.get_job(record.id, tenant="")
        assert got is not None
        assert (got.status, got.dedup_active, got.completed_at) == ("completed", False, T0 + MS)
        assert (got.result_path, got.result_hmac) == (f"external-data/{record.id}.json", "9f1c")
        assert not await complete(store, record.id)
        failed = await store.fail_job(
            record.id,
            from_statuses=["pending", "processing"],
            error="late",
            completed_at=T0,
            event=event(record.id, "failed"),
        )
        assert not failed
        assert await store.count_unsent() == 1
        await store.assign_feed_seq()
        feed = await store.read_feed(after=0, limit=10, tenant="", products=None)
        assert [r.event() for r in feed] == [event(record.id, "completed", T0 + MS)]

    async def test_cancel_from_active_statuses_only(self, store: MetadataStore) -> None:
        """§14.4: pending and processing jobs cancel once, with their event; terminal ones
        do not, and write no event."""
        pending, running, done = (
            job("p"),
            await processing_job(store, "r"),
            await processing_job(store, "d"),
        )
        await store.insert_job(pending)
        assert await complete(store, done.id, T0 + MS)

        async def cancel(job_id: str) -> bool:
            return await store.cancel_job(
                job_id, canceled_at=T0 + 2 * MS, event=event(job_id, "canceled", T0 + 2 * MS)
            )

        assert await cancel(pending.id)
        assert await cancel(running.id)
        assert not await cancel(pending.id)
        assert not await cancel(done.id)
        for record in (pending, running):
            got = await store.get_job(record.id, tenant="")
            assert got is not None
            assert (got.status, got.dedup_active, got.completed_at) == (
                "canceled",
                False,
                T0 + 2 * MS,
            )
            assert await store.job_status(record.id) == "canceled"
        assert not await complete(store, running.id, T0 + 3 * MS)
        assert not await store.claim_job(pending.id, T0 + 3 * MS)
        assert await store.job_status(done.id) == "completed"
        assert await store.job_status(new_id()) is None
        assert await store.count_unsent() == 3
        assert await store.find_dedup_match("p", T0, tenant="") is None

    async def test_cancel_racing_completion_ends_in_one_state_200_times(
        self, store: MetadataStore
    ) -> None:
        """§14.4: a cancel and a completion of the same processing job, started together, 200
        times: exactly one CAS wins each time, and the one outbox row is the winner's."""
        jobs = [await processing_job(store, f"race-{i}") for i in range(200)]

        async def race(record: JobRecord) -> tuple[bool, bool]:
            canceled, completed = await asyncio.gather(
                store.cancel_job(
                    record.id, canceled_at=T0 + MS, event=event(record.id, "canceled", T0 + MS)
                ),
                complete(store, record.id, T0 + MS),
            )
            return canceled, completed

        outcomes = await asyncio.gather(*(race(record) for record in jobs))
        assert all(canceled != completed for canceled, completed in outcomes)
        await store.assign_feed_seq()
        feed = await store.read_feed(after=0, limit=1000, tenant="", products=None)
        events = {row.event().job_id: row.event().event_type for row in feed}
        assert len(feed) == 200
        for record, (canceled, _) in zip(jobs, outcomes, strict=True):
            got = await store.get_job(record.id, tenant="")
            assert got is not None
            assert got.status == ("canceled" if canceled else "completed")
            assert events[record.id] == got.status
        assert set(events.values()) <= {"canceled", "completed"}

    async def test_fail_from_allowed_statuses_only(self, store: MetadataStore) -> None:
        record = job()
        await store.insert_job(record)
        text = "work message was not processed"

        async def fail(*statuses: str) -> bool:
            return await store.fail_job(
                record.id,
                from_statuses=statuses,  # type: ignore[arg-type]
                error=text,
                completed_at=T0 + MS,
                event=event(record.id, "failed", T0 + MS),
            )

        assert not await fail("processing")
        assert await fail("pending")
        got = await store.get_job(record.id, tenant="")
        assert got is not None
        assert (got.status, got.error, got.dedup_active) == ("failed", text, False)
        assert got.completed_at == T0 + MS
        assert not await fail("pending", "processing")
        assert await store.count_unsent() == 1
        with pytest.raises(ValueError, match="from_statuses"):
            await fail("completed")
        with pytest.raises(ValueError, match="from_statuses"):
            await fail()

    async def test_reap_candidates_and_recovery_lists(self, store: MetadataStore) -> None:
        hour = timedelta(hours=1)
        stale_pending = job("a", created=T0 - 2 * hour)
        fresh_pending = job("b", created=T0)
        stale_processing = job("c", created=T0 - hour, limits='{"timeoutSeconds":30}')
        fresh_processing = job("d", created=T0 - hour + MS)
        for record in (stale_pending, fresh_pending, stale_processing, fresh_processing):
            await store.insert_job(record)
        await store.claim_job(stale_processing.id, T0 - hour)
        await store.claim_job(fresh_processing.id, T0)
        found = await store.reap_candidates(
            pending_created_before=T0 - hour,
            processing_started_before=T0 - MS,
            limit=10,
        )
        assert [r.id for r in found] == [stale_pending.id, stale_processing.id]
        assert found[1].limits_json == '{"timeoutSeconds":30}'
        limited = await store.reap_candidates(
            pending_created_before=T0, processing_started_before=T0, limit=1
        )
        assert [r.id for r in limited] == [stale_pending.id]
        pending = await store.jobs_with_status("pending")
        assert [r.id for r in pending] == [stale_pending.id, fresh_pending.id]
        processing = await store.jobs_with_status("processing")
        assert [r.id for r in processing] == [stale_processing.id, fresh_processing.id]

    # -- outbox and feed -------------------------------------------------------------------

    async def test_outbox_claim_mark_sent_and_feed(self, store: MetadataStore) -> None:
        records = [await processing_job(store, f"o{i}") for i in range(4)]
        for i, record in enumerate(records[:3]):
            assert await complete(store, record.id, T0 + i * MS)
        await store.fail_job(
            records[3].id,
            from_statuses=["processing"],
            error="boom",
            completed_at=T0 + 3 * MS,
            event=event(records[3].id, "failed", T0 + 3 * MS),
        )
        await store.assign_feed_seq()
        assert await store.count_unsent() == 4
        async with store.claim_unsent(created_before=T0 + 2 * MS, limit=10) as batch:
            assert [r.job_id for r in batch.rows] == [records[0].id, records[1].id]
            await batch.mark_sent([batch.rows[0].ce_id], T0 + 5 * MS)
        assert await store.count_unsent() == 3
        async with store.claim_unsent(created_before=T0 + 10 * MS, limit=2) as batch:
            assert [r.job_id for r in batch.rows] == [records[1].id, records[2].id]
        await store.mark_sent([f"fetcher.job.failed.{records[3].id}"], T0 + 6 * MS)
        assert await store.count_unsent() == 2

        feed = await store.read_feed(after=0, limit=10, tenant="", products=None)
        assert [r.job_id for r in feed] == [r.id for r in records]
        seqs = [r.feed_seq or 0 for r in feed]
        assert seqs == sorted(seqs)
        assert feed[0].sent_at == T0 + 5 * MS
        assert feed[1].sent_at is None
        assert feed[3].sent_at == T0 + 6 * MS
        assert feed[0].headers == event(records[0].id).headers
        assert list(feed[0].headers)[:2] == ["ce-specversion", "ce-id"]
        assert [
            r.job_id
            for r in await store.read_feed(after=seqs[1], limit=1, tenant="", products=None)
        ] == [records[2].id]
        failed = await store.read_feed(
            after=0, limit=10, event_type="failed", tenant="", products=None
        )
        assert [r.job_id for r in failed] == [records[3].id]
        assert await store.read_feed(after=seqs[-1], limit=10, tenant="", products=None) == []

    async def test_a_job_keeps_its_trace_id(self, store: MetadataStore) -> None:
        """§15.3: written with the job, read back by every job read, NULL when absent."""
        traced = replace(job("h1"), trace_id=TRACEPARENT.split("-")[1])
        untraced = job("h2")
        await store.insert_job(traced)
        await store.insert_job(untraced)
        await store.claim_job(traced.id, T0)
        assert await complete(store, traced.id, T0 + MS)
        got = await store.get_job(traced.id, tenant="")
        assert got is not None
        assert got.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
        missing = await store.get_job(untraced.id, tenant="")
        assert missing is not None
        assert missing.trace_id is None
        with pytest.raises(ValueError, match="trace_id"):
            replace(untraced, trace_id="4BF92F3577B34DA6A3CE929D0E0E4736")

    async def test_backlog_counts_pending_jobs_and_unsent_rows_with_their_oldest(
        self, store: MetadataStore
    ) -> None:
        """§15.2 gauges: only ``pending`` jobs and rows without ``sent_at``, every tenant."""
        assert await store.backlog() == Backlog(0, None, 0, None)
        older, newer = job("h1", created=T0), job("h2", created=T0 + 5 * MS)
        other_tenant = replace(job("h3", created=T0 + 9 * MS), tenant="acme")
        for record in (newer, older, other_tenant):
            await store.insert_job(record)
        running = job("h4", created=T0 - MS)
        await store.insert_job(running)
        await store.claim_job(running.id, T0)
        assert await complete(store, running.id, T0 + 2 * MS)  # its event row is unsent
        assert await store.backlog() == Backlog(3, T0, 1, T0 + 2 * MS)
        async with store.claim_unsent(created_before=T0 + 1000 * MS, limit=10) as batch:
            await batch.mark_sent([r.ce_id for r in batch.rows], T0 + 3 * MS)
        assert await store.backlog() == Backlog(3, T0, 0, None)

    async def test_outbox_row_keeps_its_trace_context(self, store: MetadataStore) -> None:
        """Issue 22: the terminal transition's trace context is stored with the row, read
        back by the relay's claim and the feed alike; an untraced row reads back NULL."""
        traced_job = await processing_job(store, "t1")
        plain_job = await processing_job(store, "t2")
        traced = replace(
            event(traced_job.id, "failed", T0 + MS), traceparent=TRACEPARENT, tracestate="v=1"
        )
        for record, stored in ((traced_job, traced), (plain_job, event(plain_job.id, "failed"))):
            assert await store.fail_job(
                record.id,
                from_statuses=["processing"],
                error="boom",
                completed_at=T0 + MS,
                event=stored,
            )
        await store.assign_feed_seq()
        async with store.claim_unsent(created_before=T0 + 10 * MS, limit=10) as batch:
            claimed = {r.job_id: (r.traceparent, r.tracestate) for r in batch.rows}
        assert claimed == {traced_job.id: (TRACEPARENT, "v=1"), plain_job.id: (None, None)}
        feed = await store.read_feed(after=0, limit=10, tenant="", products=None)
        assert [r.event() for r in feed] == [traced, event(plain_job.id, "failed")]
        assert "ce-traceparent" not in feed[0].headers  # the feed's eleven §8.4 headers

    async def test_claim_commits_marks_when_the_body_raises(self, store: MetadataStore) -> None:
        for i in range(2):
            record = await processing_job(store, f"r{i}")
            await complete(store, record.id)

        async def publish_then_fail() -> None:
            async with store.claim_unsent(created_before=T0 + MS, limit=10) as batch:
                await batch.mark_sent([batch.rows[0].ce_id], T0)
                raise RuntimeError("publish failed")

        with pytest.raises(RuntimeError, match="publish failed"):
            await publish_then_fail()
        assert await store.count_unsent() == 1

    async def test_feed_seq_is_gap_free(self, store: MetadataStore) -> None:
        records = [await processing_job(store, f"g{i}") for i in range(12)]
        await asyncio.gather(*(complete(store, r.id) for r in records), store.assign_feed_seq())
        await store.assign_feed_seq()
        feed = await store.read_feed(after=0, limit=100, tenant="", products=None)
        seqs = [r.feed_seq for r in feed]
        assert len(seqs) == 12
        assert seqs[0] is not None
        assert seqs == list(range(seqs[0], seqs[0] + 12))
        assert await store.assign_feed_seq() == 0
