"""The Worker path with no servers: claim, extract, encrypt, store, record, publish (§4, §7, §8)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from fetcher.crypto import decrypt_object, hmac_hex, sign_message, verify_message
from fetcher.services.errors import ApiError
from fetcher.services.jobs.reaper import NOT_PROCESSED
from fetcher.services.principal import ANONYMOUS
from fetcher.services.timeutil import SystemClock
from tests.unit.worker.conftest import EXCHANGE, QUEUE, FakeDelivery, World

MAPPED = {"pg": {"public.accounts": ["id", "balance"]}}


async def test_a_job_completes_with_a_verified_object_and_one_signed_event(world: World) -> None:
    job_id = await world.submit(MAPPED)  # the Manager's live test connects once (§3.6)
    connects = world.database.opened
    delivery = world.delivery()
    await world.handler.handle(delivery)
    assert delivery.outcome == "ack"
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "completed"
    assert job.result_path == f"external-data/{job_id}.json"
    plaintext = decrypt_object(world.keys.storage, await world.objects.read(job.result_path))
    assert json.loads(plaintext) == {
        "pg": {"accounts": [{"balance": "10.50", "id": 1}, {"balance": "0.00", "id": 2}]}
    }
    assert hmac_hex(world.keys.external_hmac, plaintext) == job.result_hmac
    # §4.3 steps 2-3 on one connection: planned and extracted without a second connect
    assert world.database.opened == connects + 1
    assert world.database.closed == world.database.opened
    assert await world.relay.drain_all() == 1
    ((routing_key, body, headers),) = world.publisher.events
    assert routing_key == "job.completed"
    payload = json.loads(body)
    assert list(payload) == [
        "job_id",
        "status",
        "metadata",
        "result",
        "execution_time_ms",
        "completed_at",
    ]
    assert list(payload["result"]) == [
        "path",
        "size_bytes",
        "row_count",
        "format",
        "hmac",
        "integrity",
        "protection",
    ]
    assert payload["result"]["hmac"] == job.result_hmac
    assert payload["result"]["size_bytes"] == len(plaintext)
    assert payload["result"]["row_count"] == 2
    assert headers["ce-id"] == f"fetcher.job.completed.{job_id}"
    assert headers["ce-type"] == "studio.lerian.job.completed"
    assert headers["ce-tenantid"] == "single-tenant"
    assert verify_message(
        world.keys.external_hmac,
        headers["x-message-signature"],
        t=headers["t"],
        body=body,
        exchange=EXCHANGE,
        routing_key=routing_key,
    )
    assert await world.relay.drain_all() == 0  # marked sent: no second publish


async def test_a_redelivered_completed_job_is_acked_without_a_second_run(world: World) -> None:
    await world.submit(MAPPED)
    await world.handler.handle(world.delivery())
    streamed = list(world.database.streamed)
    again = world.delivery()
    await world.handler.handle(again)
    assert again.outcome == "ack"
    assert world.database.streamed == streamed


async def test_unknown_table_and_fields_fail_with_the_exact_text_and_no_object(
    world: World,
) -> None:
    job_id = await world.submit({"pg": {"nope": ["id"], "accounts": ["id", "ghost", "zz"]}})
    await world.handler.handle(world.delivery())
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "failed"
    assert job.error == (
        "extraction request failed schema validation: table 'nope' not found in datasource "
        "'pg'; unknown fields for table 'accounts' in datasource 'pg': ghost, zz"
    )
    assert not await world.objects.exists(f"external-data/{job_id}.json")
    await world.relay.drain_all()
    ((routing_key, body, headers),) = world.publisher.events
    assert routing_key == "job.failed"
    assert json.loads(body) == {
        "job_id": job_id,
        "status": "failed",
        "metadata": {"source": "payments", "error": {"message": job.error}},
    }
    assert headers["ce-id"] == f"fetcher.job.failed.{job_id}"


async def test_a_connect_failure_is_redacted(world: World) -> None:
    job_id = await world.submit(MAPPED)  # the live test passes; the server dies afterwards
    world.database.fail_on["connect"] = (
        'connection to server at "db.internal.example" (10.1.2.3), port 5432 failed: '
        "password sentinel-Pa55word rejected"
    )
    await world.handler.handle(world.delivery())
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.error is not None
    assert job.error.startswith("failed to connect to datasource 'pg': ")
    for leak in ("db.internal.example", "10.1.2.3", "sentinel-Pa55word"):
        assert leak not in job.error


async def test_result_over_the_limit_fails_and_stores_nothing(world: World) -> None:
    job_id = await world.submit(MAPPED, limits={"maxResultBytes": 10})
    await world.handler.handle(world.delivery())
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.error == "extraction result exceeds the configured size limit (10 bytes)"
    assert not await world.objects.exists(f"external-data/{job_id}.json")


async def test_forged_and_tampered_messages_are_dead_lettered_and_run_nothing(world: World) -> None:
    job_id = await world.submit(MAPPED)
    original = world.delivery()
    forged = FakeDelivery(original.body, {**original.headers, "x-message-signature": "0" * 64})
    unsigned = FakeDelivery(original.body, {k: v for k, v in original.headers.items() if k != "t"})
    tampered = FakeDelivery(original.body.replace(b"accounts", b"accountz"), original.headers)
    wrong_version = FakeDelivery(original.body, {**original.headers, "signature-version": "v2"})
    for delivery in (forged, unsigned, tampered, wrong_version):
        await world.handler.handle(delivery)
        assert delivery.outcome == "reject"
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "pending"
    assert world.database.streamed == []


def _resigned(world: World, body: bytes, headers: dict[str, object], t: int) -> FakeDelivery:
    job_id = json.loads(body).get("jobId", "") if body.startswith(b"{") else ""
    signature = sign_message(
        world.keys.internal_hmac,
        t=t,
        body=body,
        exchange="",
        routing_key=QUEUE,
        job_id=job_id if isinstance(job_id, str) else "",
    )
    return FakeDelivery(body, {**headers, "t": str(t), "x-message-signature": signature})


async def test_an_expired_message_fails_its_pending_job(world: World) -> None:
    job_id = await world.submit(MAPPED)
    original = world.delivery()
    stale = _resigned(world, original.body, original.headers, int(time.time()) - 3601)
    await world.handler.handle(stale)
    assert stale.outcome == "reject"
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert (job.status, job.error) == ("failed", "work message expired before processing")


async def test_invalid_payload_fails_the_recovered_job(world: World) -> None:
    job_id = await world.submit(MAPPED)
    original = world.delivery()
    body = json.dumps({"jobId": job_id, "mappedFields": {}}).encode()
    invalid = _resigned(world, body, original.headers, int(time.time()))
    await world.handler.handle(invalid)
    assert invalid.outcome == "reject"
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.error == "invalid work message: mappedFields is missing or empty"


async def test_header_and_body_job_ids_that_differ_are_rejected_untouched(world: World) -> None:
    job_id = await world.submit(MAPPED)
    original = world.delivery()
    mismatched = FakeDelivery(original.body, {**original.headers, "jobId": "other"})
    await world.handler.handle(mismatched)
    assert mismatched.outcome == "reject"
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "pending"


async def test_a_message_for_an_unknown_job_is_acked_and_dropped(world: World) -> None:
    await world.submit(MAPPED)
    original = world.delivery()
    body = original.body.replace(b'"jobId":"', b'"jobId":"0').replace(b"0", b"", 1)
    doc = json.loads(original.body)
    doc["jobId"] = "0190a1b2-0000-7000-8000-00000000ffff"
    body = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    delivery = _resigned(world, body, {**original.headers, "jobId": doc["jobId"]}, int(time.time()))
    await world.handler.handle(delivery)
    assert delivery.outcome == "ack"


async def test_the_reaper_fails_stale_pending_jobs_once(world: World) -> None:
    job_id = await world.submit(MAPPED)
    world.reaper.pending_timeout = 0
    world.reaper.clock = _Later()
    assert await world.reaper.tick() == 1
    assert await world.reaper.tick() == 0
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert (job.status, job.error) == ("failed", NOT_PROCESSED)


class _Later(SystemClock):
    """A clock five seconds ahead, so a zero pending timeout has elapsed."""

    def now(self) -> datetime:
        return super().now() + timedelta(seconds=5)


async def test_publish_failure_at_creation_fails_the_job_with_its_event(world: World) -> None:
    world.publisher.fail = True
    body = {"dataRequest": {"mappedFields": MAPPED}, "metadata": {"source": "payments"}}
    with pytest.raises(ApiError) as caught:
        await world.jobs.create(body, request_id="r-2", principal=ANONYMOUS)
    assert caught.value.code == "FET-0003"
    world.publisher.fail = False
    await world.relay.drain_all()
    ((routing_key, body_bytes, _headers),) = world.publisher.events
    assert routing_key == "job.failed"
    assert json.loads(body_bytes)["metadata"]["error"] == {
        "message": "process failed: unable to publish"
    }


async def test_a_decimal_t_with_leading_zeros_is_verified_as_sent(world: World) -> None:
    """§7.4 row 1 accepts any ``^[0-9]{1,12}$`` string; the signature covers that text."""
    job_id = await world.submit(MAPPED)
    original = world.delivery()
    t = f"0{int(time.time())}"
    signature = sign_message(
        world.keys.internal_hmac,
        t=t,
        body=original.body,
        exchange="",
        routing_key=QUEUE,
        job_id=job_id,
    )
    delivery = FakeDelivery(
        original.body, {**original.headers, "t": t, "x-message-signature": signature}
    )
    await world.handler.handle(delivery)
    assert delivery.outcome == "ack"
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "completed"


class BrokenAckDelivery(FakeDelivery):
    """A delivery whose channel died between the claim and the ack (found by the chaos suite)."""

    async def ack(self) -> None:
        raise ConnectionError("channel is closed")


async def test_a_failed_ack_after_the_claim_still_runs_the_job(world: World) -> None:
    """§4.2/§7.4 row 8: the claim, not the ack, is the record. A claimed job whose ack fails
    completes now instead of waiting in ``processing`` for the reaper, and its redelivery is
    acked and dropped by the claim CAS."""
    job_id = await world.submit(MAPPED)
    body, headers = world.publisher.work[-1]
    await world.handler.handle(BrokenAckDelivery(body, dict(headers)))
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "completed"
    redelivery = world.delivery()
    await world.handler.handle(redelivery)
    assert redelivery.outcome == "ack"
    assert await world.relay.drain_all() == 1  # one job.completed, not two


async def test_a_rotated_worker_takes_old_key_messages_and_records_the_summary(
    world: World,
) -> None:
    """§14.3: a Worker whose current key is new still verifies a work message signed with an
    ``APP_ENC_KEY_PREVIOUS`` internal key (a Manager not yet rotated), and a key it does not
    hold is still refused. §14.1: the summary recorded with the status is the object's."""
    job_id = await world.submit(MAPPED)
    stranger = FakeDelivery(world.delivery().body, dict(world.delivery().headers))
    rotated = replace(
        world.handler,
        internal_key=b"\x01" * 32,
        previous_internal_keys=(world.keys.internal_hmac,),
    )
    unrelated = replace(world.handler, internal_key=b"\x02" * 32)
    await unrelated.handle(stranger)
    assert stranger.outcome == "reject"
    delivery = world.delivery()
    await rotated.handle(delivery)
    assert delivery.outcome == "ack"
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "completed"
    assert job.result_path is not None
    assert job.result_summary_json is not None
    stored = await world.objects.read(job.result_path)
    document = json.loads(decrypt_object(world.keys.storage, stored))
    summary = json.loads(job.result_summary_json)
    assert summary["sizeBytes"] == len(stored)
    assert summary["tables"] == {
        ds: {table: len(rows) for table, rows in tables.items()} for ds, tables in document.items()
    }
    assert summary["rowCount"] == sum(len(r) for t in document.values() for r in t.values())
    assert job.result_key_version == world.extraction.key_version
