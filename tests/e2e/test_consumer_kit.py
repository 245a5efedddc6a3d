"""The consumer kit (fetcher.consumer) and examples/consumer.py against the real stack:
a Manager and a Worker process, PostgreSQL, RabbitMQ and SeaweedFS (issue 9 "Must show").

One completed and one failed job run once for the module; the test then republishes their
real events (the Worker's exact headers and body) through the events exchange, the way a
broker redelivers them, and tampers with copies in transit."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from fetcher.consumer import (
    BadSignatureError,
    ConsumerKeys,
    IntegrityError,
    JobCompleted,
    JobFailed,
    PostgresDeduplicator,
    ResultRef,
    S3Source,
    open_result,
    open_result_sync,
    verify_event,
)
from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    DatabaseFactory,
    ReceivedEvent,
    Stack,
    encode_rows,
    unique,
)
from tests.services import RABBITMQ_URL, S3_ACCESS_KEY, S3_ENDPOINT, S3_SECRET_KEY

pytestmark = E2E

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "consumer.py"
ACCOUNTS = ["id", "email", "balance", "active", "opened_on", "created_at", "external_ref"]


@dataclass(frozen=True)
class Jobs:
    completed: ReceivedEvent
    failed: ReceivedEvent
    job: dict[str, Any]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def jobs(stack: Stack) -> Jobs:
    """One job that completes (two tables) and one that fails (unknown table)."""
    ok_fields = {SOURCE_CONFIG: {"public.accounts": ACCOUNTS, "ledger.entries": ["*"]}}
    bad_fields = {SOURCE_CONFIG: {"public.no_such_table": ["id"]}}
    async with stack.launcher.running_worker():
        ok_id = await stack.api.submit(ok_fields)
        bad_id = await stack.api.submit(bad_fields)
        completed = await stack.broker.collector.wait_for(ok_id, "job.completed")
        failed = await stack.broker.collector.wait_for(bad_id, "job.failed")
        job = await stack.api.wait_terminal(ok_id)
    return Jobs(completed, failed, job)


def kit_keys(stack: Stack) -> ConsumerKeys:
    """The keys as a consumer holds them: the two ``fetcher derive-key`` outputs."""
    return ConsumerKeys.from_hex(
        external=stack.keys.external.hex(), storage=stack.keys.storage.hex()
    )


def s3_source(stack: Stack) -> S3Source:
    return S3Source(
        stack.results.bucket,
        endpoint_url=S3_ENDPOINT,
        access_key_id=S3_ACCESS_KEY,
        secret_access_key=S3_SECRET_KEY,
    )


def verify(stack: Stack, event: ReceivedEvent, **overrides: Any) -> Any:
    options: dict[str, Any] = {
        "exchange": event.exchange,
        "routing_key": event.routing_key,
        "keys": kit_keys(stack),
    }
    options |= overrides
    body = options.pop("body", event.body)
    return verify_event(dict(event.headers), body, **options)


async def test_real_events_verify_into_typed_values(stack: Stack, jobs: Jobs) -> None:
    completed = verify(stack, jobs.completed)
    assert isinstance(completed, JobCompleted)
    assert completed.job_id == jobs.job["id"]
    assert completed.result.path == jobs.job["resultPath"]
    assert completed.result.hmac == jobs.job["resultHmac"]
    assert completed.completed_at == jobs.job["completedAt"]
    assert completed.envelope.tenant_id == "single-tenant"
    assert completed.ce_id == f"fetcher.job.completed.{completed.job_id}"
    failed = verify(stack, jobs.failed)
    assert isinstance(failed, JobFailed)
    assert failed.error_message.startswith("extraction request failed schema validation")


async def test_tampered_in_transit_or_wrong_key_is_rejected(stack: Stack, jobs: Jobs) -> None:
    event = jobs.completed
    with pytest.raises(BadSignatureError):
        verify(stack, event, body=event.body.replace(b'"row_count":', b'"row_count":1'))
    with pytest.raises(BadSignatureError):
        verify(stack, event, routing_key="job.failed")
    with pytest.raises(BadSignatureError):
        verify(stack, event, exchange="fetcher.job.events.other")
    stranger = ConsumerKeys.from_master(base64.b64encode(b"k" * 32).decode())
    with pytest.raises(BadSignatureError):
        verify(stack, event, keys=stranger)


async def test_result_rows_equal_the_source_query(stack: Stack, jobs: Jobs) -> None:
    event = verify(stack, jobs.completed)
    async with s3_source(stack) as s3, await open_result(event, s3, kit_keys(stack)) as result:
        tables = {(t.datasource, t.table): list(t.rows) for t in result.tables()}
        assert result.size_bytes == event.result.size_bytes
    columns, rows = stack.source.query(f"SELECT {', '.join(ACCOUNTS)} FROM public.accounts")
    expected_accounts = encode_rows(columns, rows)
    columns, rows = stack.source.query("SELECT * FROM ledger.entries")
    expected_entries = encode_rows(columns, rows)
    assert sorted(tables) == [(SOURCE_CONFIG, "accounts"), (SOURCE_CONFIG, "ledger.entries")]

    def by(key: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(items, key=lambda r: r[key])

    assert by("id", tables[SOURCE_CONFIG, "accounts"]) == by("id", expected_accounts)
    entries = tables[SOURCE_CONFIG, "ledger.entries"]
    assert by("entry_id", entries) == by("entry_id", expected_entries)
    assert sum(len(v) for v in tables.values()) == event.result.row_count


async def test_a_sync_program_opens_the_same_result_from_s3(stack: Stack, jobs: Jobs) -> None:
    """``open_result_sync`` with an S3Source it opens itself (a plain thread, no event loop):
    the same verified rows as the async form."""
    event = verify(stack, jobs.completed)
    async with s3_source(stack) as s3, await open_result(event, s3, kit_keys(stack)) as result:
        expected = list(result.rows())

    def sync_program() -> list[tuple[str, str, dict[str, Any]]]:
        with open_result_sync(jobs.job, s3_source(stack), kit_keys(stack)) as opened:
            return list(opened.rows())

    assert await asyncio.to_thread(sync_program) == expected
    assert len(expected) == event.result.row_count


def _flip_one_byte(stored: bytes) -> bytes:
    raw = bytearray(base64.b64decode(stored))
    raw[len(raw) // 2] ^= 0x20
    return base64.b64encode(bytes(raw))


@pytest.mark.parametrize("damage", ["flipped", "cut"])
async def test_damaged_object_raises_integrity_and_no_row(
    stack: Stack, jobs: Jobs, damage: str
) -> None:
    """A copy of the real object with one ciphertext byte flipped, or its last 100 base64
    characters cut, stored in the bucket under a new key: open_result raises and yields
    nothing (it returns no result object at all)."""
    stored = stack.results.read(jobs.job["resultPath"])
    damaged = _flip_one_byte(stored) if damage == "flipped" else stored[:-100]
    key = f"tampered/{unique(damage)}.json"
    stack.results.s3.put_object(Bucket=stack.results.bucket, Key=key, Body=damaged)
    ref = ResultRef(key, jobs.job["resultHmac"])
    yielded: list[Any] = []

    async def read_all() -> None:
        async with s3_source(stack) as s3:
            result = await open_result(ref, s3, kit_keys(stack))
            yielded.extend(result.rows())

    with pytest.raises(IntegrityError):
        await read_all()
    assert yielded == []


@contextlib.asynccontextmanager
async def running_example(
    stack: Stack, queue: str, count: int, dedup_dsn: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "FETCHER_EXTERNAL_KEY": stack.keys.external.hex(),
        "FETCHER_STORAGE_KEY": stack.keys.storage.hex(),
        "OBJECT_STORAGE_BUCKET": stack.results.bucket,
        "OBJECT_STORAGE_ENDPOINT": S3_ENDPOINT,
        "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "OBJECT_STORAGE_SECRET_KEY": S3_SECRET_KEY,
    }
    argv = [str(EXAMPLE), "--amqp", RABBITMQ_URL, "--exchange", stack.names.events_exchange]
    argv += ["--queue", queue, "--count", str(count), "--dedup-dsn", dedup_dsn]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *argv,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        async with stack.broker.channel() as channel:
            await channel.queue_delete(queue)


async def republish(
    stack: Stack, event: ReceivedEvent, *, body: bytes | None = None, routing_key: str | None = None
) -> None:
    """Publish the event's exact headers and body (or a tampered copy) through the events
    exchange, as a broker redelivery or the repairer's re-emission would."""
    import aio_pika

    headers: Mapping[str, Any] = dict(event.headers)
    async with stack.broker.channel() as channel:
        exchange = await channel.get_exchange(stack.names.events_exchange, ensure=False)
        message = aio_pika.Message(
            body if body is not None else event.body,
            headers=dict(headers),
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        await exchange.publish(message, routing_key=routing_key or event.routing_key)


async def test_example_processes_a_thrice_delivered_event_once(
    stack: Stack, jobs: Jobs, databases: DatabaseFactory
) -> None:
    """examples/consumer.py, with PostgreSQL deduplication: the same job.completed delivered
    three times is processed once (two duplicates acknowledged), the failed job once, and a
    body or routing key tampered in transit is rejected."""
    dedup_db = databases.create("fetcher_e2e_dedup")
    queue = unique("fetcher.e2e.example")
    completed, failed = jobs.completed, jobs.failed
    async with running_example(stack, queue, 6, dedup_db.url) as process:
        assert process.stdout is not None
        ready = await asyncio.wait_for(process.stdout.readline(), 30)
        assert ready.decode().startswith(f"ready: queue {queue}"), ready
        for _ in range(3):
            await republish(stack, completed)
        await republish(stack, failed)
        await republish(stack, completed, body=completed.body.replace(b"completed", b"complete"))
        await republish(stack, completed, routing_key="job.failed")
        out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    job_id = jobs.job["id"]
    processed = [line for line in lines if line.startswith("completed ")]
    assert processed == [
        f"completed {job_id} rows=9 {SOURCE_CONFIG}.accounts=6 {SOURCE_CONFIG}.ledger.entries=3"
    ]
    assert lines.count(f"duplicate fetcher.job.completed.{job_id}") == 2
    assert sum(line.startswith(f"failed {failed.job_id}: ") for line in lines) == 1
    assert sum(line.startswith("rejected BadSignatureError") for line in lines) == 2
    assert len(lines) == 6
    claimed = dedup_db.records("SELECT ce_id FROM fetcher_consumed_events ORDER BY ce_id")
    assert [r["ce_id"] for r in claimed] == sorted(
        [f"fetcher.job.completed.{job_id}", f"fetcher.job.failed.{failed.job_id}"]
    )


async def test_postgres_deduplicator_claims_once_across_replicas(
    databases: DatabaseFactory,
) -> None:
    db = databases.create("fetcher_e2e_dedup2")
    async with PostgresDeduplicator(db.url) as a, PostgresDeduplicator(db.url) as b:
        ce_id = f"fetcher.job.completed.{unique('x')}"
        results = await asyncio.gather(*(d.claim(ce_id) for d in (a, b, a, b)))
        assert sorted(results) == [False, False, False, True]
        await a.release(ce_id)
        assert await b.claim(ce_id) is True
        assert await a.purge(older_than_seconds=0) == 1
        assert await a.claim(ce_id) is True
