"""The Worker in multi-tenant mode (§12.5) with no servers: the work message's signed
``X-Tenant-ID`` picks the tenant the job is loaded in; the result is stored under
``<tenantId>/`` with the tenant's keys; the event carries and is signed for the tenant.

Also the decision the contract leaves open: a tenant header that does not fit the Worker's
mode is dead-lettered as an invalid message (reason ``payload``) and no job is touched.
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from fetcher.consumer import ConsumerKeys, TenantMismatchError, verify_event
from fetcher.consumer.errors import BadSignatureError
from fetcher.crypto import DecryptionError, decrypt_object, hmac_hex, sign_message
from fetcher.engine import ConnectionDescriptor
from fetcher.engine.types import EngineType
from fetcher.services.jobs.work_messages import (
    signed_work_headers,
    work_message_body,
    work_message_headers,
)
from fetcher.services.records import ConnectionRecord, JobRecord
from fetcher.services.store_roles import StoreUnavailableError
from fetcher.services.timeutil import SystemClock, new_id
from tests.unit.worker.conftest import EXCHANGE, MASTER, QUEUE, FakeDelivery, World

MAPPED = {"pg": {"public.accounts": ["id", "balance"]}}
REJECTED = "fetcher_work_messages_rejected_total"


def rejected(world: World, reason: str) -> float:
    value = world.handler.metrics.registry.get_sample_value(REJECTED, {"reason": reason})
    return value or 0.0


async def tenant_connection(world: World, tenant: str) -> ConnectionRecord:
    """A copy of the world's ``pg`` connection owned by ``tenant`` (same configName)."""
    connection_id = new_id()
    record = dataclasses.replace(
        world.connection,
        id=connection_id,
        tenant=tenant,
        password_encrypted=world.extraction.cipher.encrypt("sentinel-Pa55word", connection_id),
    )
    await world.store.insert_connection(record)
    return record


async def tenant_job(world: World, tenant: str, connection: ConnectionRecord | None) -> JobRecord:
    """A pending job of ``tenant`` stored as the Manager stores it (§4.7)."""
    now = SystemClock().now()
    job = JobRecord(
        id=new_id(),
        status="pending",
        request_hash=new_id(),  # distinct: the active-hash guard is per tenant (§3.8)
        mapped_fields_json=json.dumps(MAPPED, separators=(",", ":")),
        metadata_json='{"source":"payments"}',
        created_at=now,
        updated_at=now,
        connection_ids={"pg": connection.id} if connection else {},
        request_id="r-tenant",
        tenant=tenant,
    )
    await world.store.insert_job(job)
    return job


def delivery_for(world: World, job: JobRecord, *, tenant: str | None = None) -> FakeDelivery:
    """The work message the Manager publishes for ``job`` (§7.2), optionally signed for
    another ``tenant`` instead of the job's."""
    body = work_message_body(job)
    if tenant is None:
        headers = work_message_headers(
            world.keys.internal_hmac, job, body, routing_key=QUEUE, request_id="r-1"
        )
    else:
        headers = signed_work_headers(
            world.keys.internal_hmac,
            body,
            routing_key=QUEUE,
            base={"jobId": job.id, "x-request-id": "r-1", "x-retry-count": 0},
            tenant=tenant,
        )
    return FakeDelivery(body, dict(headers))


@pytest.fixture
def multi(world: World) -> World:
    world.handler.multi_tenant = True
    return world


async def test_a_tenants_job_is_stored_under_its_tenant_with_its_keys(multi: World) -> None:
    world = multi
    world.extraction.key_prefix = "/exports/"
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))
    delivery = delivery_for(world, job)
    assert delivery.headers["X-Tenant-ID"] == "acme"
    await world.handler.handle(delivery)
    assert delivery.outcome == "ack"
    done = await world.store.get_job(job.id, tenant="acme")
    assert done is not None
    assert done.status == "completed", done.error
    assert done.result_path == f"exports/acme/external-data/{job.id}.json"
    stored = await world.objects.read(done.result_path)
    acme = world.keys.for_tenant("acme")
    plaintext = decrypt_object(acme.storage, stored)
    assert json.loads(plaintext)["pg"]["accounts"][0] == {"balance": "10.50", "id": 1}
    assert hmac_hex(acme.external_hmac, plaintext) == done.result_hmac
    for other in (world.keys.storage, world.keys.for_tenant("globex").storage):
        with pytest.raises(DecryptionError):
            decrypt_object(other, stored)
    assert hmac_hex(world.keys.external_hmac, plaintext) != done.result_hmac


async def test_a_tenants_event_verifies_only_with_its_tenants_keys(multi: World) -> None:
    world = multi
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))
    await world.handler.handle(delivery_for(world, job))
    assert await world.relay.drain_all() == 1
    ((routing_key, body, headers),) = world.publisher.events
    assert (headers["ce-tenantid"], headers["X-Tenant-ID"]) == ("acme", "acme")
    acme = ConsumerKeys.from_master(MASTER, tenant="acme")
    event = verify_event(headers, body, exchange=EXCHANGE, routing_key=routing_key, keys=acme)
    assert event.job_id == job.id
    assert event.status == "completed"
    with pytest.raises(TenantMismatchError):
        verify_event(
            headers,
            body,
            exchange=EXCHANGE,
            routing_key=routing_key,
            keys=ConsumerKeys.from_master(MASTER, tenant="globex"),
        )
    with pytest.raises(TenantMismatchError):  # nor does the single-tenant consumer
        verify_event(
            headers,
            body,
            exchange=EXCHANGE,
            routing_key=routing_key,
            keys=ConsumerKeys.from_master(MASTER),
        )
    # globex relabelling the headers does not help: the signature is acme's.
    forged = {**headers, "ce-tenantid": "globex", "X-Tenant-ID": "globex"}
    with pytest.raises(BadSignatureError):
        verify_event(
            forged,
            body,
            exchange=EXCHANGE,
            routing_key=routing_key,
            keys=ConsumerKeys.from_master(MASTER, tenant="globex"),
        )


async def test_another_tenants_job_is_an_unknown_job(multi: World) -> None:
    """§12.5: the job is loaded within the message's tenant; acme's job named in a message
    (validly signed) for globex is acked and dropped, and stays pending."""
    world = multi
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))
    delivery = delivery_for(world, job, tenant="globex")
    await world.handler.handle(delivery)
    assert delivery.outcome == "ack"
    still = await world.store.get_job(job.id, tenant="acme")
    assert still is not None
    assert still.status == "pending"
    assert world.database.streamed == []


async def test_the_tenant_line_is_signed(multi: World) -> None:
    world = multi
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))
    delivery = delivery_for(world, job)
    delivery.headers["X-Tenant-ID"] = "globex"  # changed after signing
    await world.handler.handle(delivery)
    assert delivery.outcome == "reject"
    assert rejected(world, "signature") == 1.0
    still = await world.store.get_job(job.id, tenant="acme")
    assert still is not None
    assert still.status == "pending"


async def test_a_connection_of_another_tenant_is_not_configured(multi: World) -> None:
    """Defence in depth: a job whose recorded connection ID belongs to another tenant
    resolves nothing (the Manager never records one; §4.3 step 1)."""
    world = multi
    job = await tenant_job(world, "acme", await tenant_connection(world, "globex"))
    await world.handler.handle(delivery_for(world, job))
    failed = await world.store.get_job(job.id, tenant="acme")
    assert failed is not None
    assert (failed.status, failed.error) == ("failed", "datasource 'pg' is not configured")
    assert world.database.streamed == []


async def test_a_multi_tenant_worker_dead_letters_a_message_without_tenant(multi: World) -> None:
    world = multi
    job = await tenant_job(world, "", world.connection)
    delivery = delivery_for(world, job)
    assert "X-Tenant-ID" not in delivery.headers
    await world.handler.handle(delivery)
    assert delivery.outcome == "reject"
    assert rejected(world, "payload") == 1.0
    untouched = await world.store.get_job(job.id, tenant="")
    assert untouched is not None
    assert untouched.status == "pending"


@pytest.mark.parametrize("tenant", ["ACME", "-acme", "a" * 64, "acme/x"])
async def test_a_tenant_breaking_the_pattern_is_dead_lettered(multi: World, tenant: str) -> None:
    world = multi
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))
    delivery = delivery_for(world, job, tenant=tenant)
    await world.handler.handle(delivery)
    assert delivery.outcome == "reject"
    assert rejected(world, "payload") == 1.0


async def test_a_single_tenant_worker_dead_letters_a_tenants_message(world: World) -> None:
    assert world.handler.multi_tenant is False
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))
    delivery = delivery_for(world, job)
    await world.handler.handle(delivery)
    assert delivery.outcome == "reject"
    assert rejected(world, "payload") == 1.0
    assert rejected(world, "signature") == 0.0
    untouched = await world.store.get_job(job.id, tenant="acme")
    assert untouched is not None
    assert untouched.status == "pending"
    assert world.database.streamed == []


async def test_a_tenant_header_that_is_not_text_is_a_signature_failure(multi: World) -> None:
    world = multi
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))
    delivery = delivery_for(world, job)
    delivery.headers["X-Tenant-ID"] = 7
    await world.handler.handle(delivery)
    assert (delivery.outcome, rejected(world, "signature")) == ("reject", 1.0)


async def test_a_bytes_tenant_header_is_read_as_text(multi: World) -> None:
    """AMQP may hand a header back as bytes; it is signed and read as its UTF-8 text."""
    world = multi
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))
    delivery = delivery_for(world, job)
    delivery.headers["X-Tenant-ID"] = b"acme"
    await world.handler.handle(delivery)
    assert delivery.outcome == "ack"
    done = await world.store.get_job(job.id, tenant="acme")
    assert done is not None
    assert done.status == "completed"


async def test_an_expired_message_fails_the_job_in_its_tenant(multi: World) -> None:
    world = multi
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))
    body = work_message_body(job)
    t = int(time.time()) - world.handler.pending_timeout - 60
    headers: dict[str, object] = {
        "jobId": job.id,
        "X-Tenant-ID": "acme",
        "t": str(t),
        "signature-version": "v1",
        "x-message-signature": sign_message(
            world.keys.internal_hmac,
            t=t,
            body=body,
            exchange="",
            routing_key=QUEUE,
            tenant="acme",
            job_id=job.id,
        ),
    }
    delivery = FakeDelivery(body, headers)
    await world.handler.handle(delivery)
    assert (delivery.outcome, rejected(world, "expired")) == ("reject", 1.0)
    failed = await world.store.get_job(job.id, tenant="acme")
    assert failed is not None
    assert failed.status == "failed"
    assert await world.relay.drain_all() == 1
    ((routing_key, event_body, event_headers),) = world.publisher.events
    assert routing_key == "job.failed"
    event = verify_event(
        event_headers,
        event_body,
        exchange=EXCHANGE,
        routing_key=routing_key,
        keys=ConsumerKeys.from_master(MASTER, tenant="acme"),
    )
    assert event.status == "failed"


async def test_the_reaper_fails_a_tenants_job_with_a_tenant_event(multi: World) -> None:
    world = multi
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))
    assert await world.reaper.fail(job, "pending", "work message was not processed") == 1
    assert await world.relay.drain_all() == 1
    ((routing_key, body, headers),) = world.publisher.events
    assert (headers["ce-tenantid"], headers["X-Tenant-ID"]) == ("acme", "acme")
    verify_event(
        headers,
        body,
        exchange=EXCHANGE,
        routing_key=routing_key,
        keys=ConsumerKeys.from_master(MASTER, tenant="acme"),
    )


async def test_a_retried_message_keeps_its_tenant_and_is_re_signed_for_it(
    multi: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§7.4 row 7 in a tenant: the republished copy names the same tenant, signed anew."""
    world = multi
    world.handler.retry_base_seconds = 0.0
    job = await tenant_job(world, "acme", await tenant_connection(world, "acme"))

    async def unavailable(*_args: object, **_kwargs: object) -> None:
        raise StoreUnavailableError("metadata store unavailable")

    with monkeypatch.context() as patch:
        patch.setattr(world.store, "claim_job", unavailable)
        original = delivery_for(world, job)
        await world.handler.handle(original)
    assert original.outcome == "ack"
    copy = world.delivery()
    assert (copy.headers["X-Tenant-ID"], copy.headers["x-retry-count"]) == ("acme", 1)
    await world.handler.handle(copy)
    assert copy.outcome == "ack"
    done = await world.store.get_job(job.id, tenant="acme")
    assert done is not None
    assert done.status == "completed"


async def test_internal_datasources_are_used_only_by_the_tenants_they_name(
    multi: World,
) -> None:
    """§12.5 ``DATASOURCE_<NAME>_TENANTS`` on the Worker: an internal ``pg`` named for acme
    serves acme's job; globex's own stored ``pg`` is not "ambiguous" with it, and a globex job
    that expects an internal ``pg`` finds none."""
    world = multi
    world.extraction.internal = {
        "pg": ConnectionDescriptor(
            config_name="pg",
            type=EngineType.POSTGRESQL,
            host="10.0.0.1",
            port=5432,
            database="ops",
            username="ro",
            password="pw",
            internal=True,
        )
    }
    world.extraction.internal_tenants = {"pg": frozenset({"acme"})}
    acme = await tenant_job(world, "acme", None)
    globex_stored = await tenant_job(world, "globex", await tenant_connection(world, "globex"))
    globex_internal = await tenant_job(world, "globex", None)
    for job in (acme, globex_stored, globex_internal):
        await world.handler.handle(delivery_for(world, job))
    outcomes = []
    for job in (acme, globex_stored, globex_internal):
        done = await world.store.get_job(job.id, tenant=job.tenant)
        assert done is not None
        outcomes.append((done.status, done.error))
    assert outcomes == [
        ("completed", None),
        ("completed", None),
        ("failed", "datasource 'pg' is not configured"),
    ]
