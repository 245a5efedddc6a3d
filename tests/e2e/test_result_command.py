"""``fetcher result get`` and ``fetcher events tail`` as processes, against the real stack."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest_asyncio

from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    DEFAULT_TIMEOUT,
    FETCHER_BIN,
    ReceivedEvent,
    Stack,
    decrypt_result_object,
    encode_rows,
    eventually,
    unique,
)
from tests.services import RABBITMQ_URL, S3_ACCESS_KEY, S3_ENDPOINT, S3_SECRET_KEY

pytestmark = E2E

FIELDS = ["id", "email", "balance", "opened_on", "created_at", "external_ref", "score", "profile"]


@dataclass(frozen=True)
class Jobs:
    job: dict[str, Any]
    completed: ReceivedEvent
    failed: ReceivedEvent


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def jobs(stack: Stack) -> Jobs:
    """A completed job over public.accounts, and a failed one (unknown table)."""
    async with stack.launcher.running_worker():
        job_id = await stack.api.submit({SOURCE_CONFIG: {"public.accounts": FIELDS}})
        bad_id = await stack.api.submit({SOURCE_CONFIG: {"public.no_such_table": ["id"]}})
        event = await stack.broker.collector.wait_for(job_id, "job.completed")
        failed = await stack.broker.collector.wait_for(bad_id, "job.failed")
        job = await stack.api.wait_terminal(job_id)
    assert job["status"] == "completed", job
    return Jobs(job, event, failed)


def cli_env(stack: Stack) -> dict[str, str]:
    """What a consumer configures: the derive-key outputs, the bucket, the Manager URL."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "FETCHER_EXTERNAL_KEY": f"External HMAC Key (hex): {stack.keys.external.hex()}",
        "FETCHER_STORAGE_KEY": f"Storage Key (hex): {stack.keys.storage.hex()}",
        "FETCHER_API_URL": stack.manager.base_url,
        "OBJECT_STORAGE_BUCKET": stack.results.bucket,
        "OBJECT_STORAGE_ENDPOINT": S3_ENDPOINT,
        "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "OBJECT_STORAGE_SECRET_KEY": S3_SECRET_KEY,
        "OBJECT_STORAGE_USE_PATH_STYLE": "true",
    }


async def fetcher(stack: Stack, *args: str, within: float = 60) -> tuple[int, bytes, bytes]:
    process = await asyncio.create_subprocess_exec(
        FETCHER_BIN,
        *args,
        env=cli_env(stack),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), within)
    assert process.returncode is not None
    return process.returncode, out, err


async def test_result_get_by_job_id_reproduces_the_source_rows(
    stack: Stack, jobs: Jobs, tmp_path: Path
) -> None:
    job = jobs.job
    target = tmp_path / "result.json"
    code, out, err = await fetcher(stack, "result", "get", job["id"], "-o", str(target))
    assert (code, out, err) == (0, b"", b"")  # piped: no progress
    written = target.read_bytes()
    stored = stack.results.read(job["resultPath"])
    assert written == decrypt_result_object(stack.keys.storage, stored)
    document = json.loads(written)
    columns, rows = stack.source.query(f"SELECT {', '.join(FIELDS)} FROM public.accounts")
    expected = sorted(encode_rows(columns, rows), key=lambda r: r["id"])
    assert sorted(document[SOURCE_CONFIG]["accounts"], key=lambda r: r["id"]) == expected
    # To stdout as well, the same bytes.
    code, out, _ = await fetcher(stack, "result", "get", job["id"])
    assert (code, out) == (0, written)


async def test_result_get_of_a_damaged_object_exits_3_and_writes_nothing(
    stack: Stack, jobs: Jobs, tmp_path: Path
) -> None:
    job = jobs.job
    raw = bytearray(base64.b64decode(stack.results.read(job["resultPath"])))
    raw[-20] ^= 0x01
    key = f"tampered/{unique('cli')}.json"
    stack.results.s3.put_object(Bucket=stack.results.bucket, Key=key, Body=base64.b64encode(raw))
    target = tmp_path / "nothing.json"
    code, out, err = await fetcher(
        stack, "result", "get", key, "--hmac", job["resultHmac"], "-o", str(target)
    )
    assert code == 3, err
    assert b"integrity check failed" in err
    assert out == b""
    assert list(tmp_path.iterdir()) == []
    # The intact object under its own key, given by key and HMAC, is fine.
    code, out, _ = await fetcher(
        stack, "result", "get", job["resultPath"], "--hmac", job["resultHmac"]
    )
    assert code == 0
    assert json.loads(out)[SOURCE_CONFIG]["accounts"]


async def test_events_tail_prints_a_redelivered_event_once(stack: Stack, jobs: Jobs) -> None:
    """tail on its own durable queue: a tampered copy is rejected, the same event published
    twice prints one line, and the failed job's event, published last, is the second line —
    so the duplicate was consumed (the queue delivers in order) and not printed."""
    import aio_pika

    job, event = jobs.job, jobs.completed
    headers: dict[str, Any] = dict(event.headers)
    queue = unique("fetcher.e2e.tail")
    env_args = ["--amqp", RABBITMQ_URL, "--exchange", stack.names.events_exchange]
    process = await asyncio.create_subprocess_exec(
        FETCHER_BIN,
        "events",
        "tail",
        "--json",
        "--queue",
        queue,
        "--count",
        "2",
        *env_args,
        env=cli_env(stack),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def bound() -> bool | None:
            try:
                _, consumers = await stack.broker.queue_state(queue)
            except aio_pika.exceptions.ChannelNotFoundEntity:
                return None
            return True if consumers else None

        await eventually(bound, "tail to consume its queue", within=DEFAULT_TIMEOUT)
        async with stack.broker.channel() as channel:
            exchange = await channel.get_exchange(stack.names.events_exchange, ensure=False)
            tampered = aio_pika.Message(event.body + b" ", headers=headers)
            await exchange.publish(tampered, routing_key=event.routing_key)
            for _ in range(2):
                message = aio_pika.Message(event.body, headers=headers)
                await exchange.publish(message, routing_key=event.routing_key)
            failed_headers: dict[str, Any] = dict(jobs.failed.headers)
            last = aio_pika.Message(jobs.failed.body, headers=failed_headers)
            await exchange.publish(last, routing_key=jobs.failed.routing_key)
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        async with stack.broker.channel() as channel:
            await channel.queue_delete(queue)
    assert process.returncode == 0, err
    assert b"rejected BadSignatureError" in err
    lines = out.decode().splitlines()
    assert len(lines) == 2, err
    assert json.loads(lines[1])["ce_id"] == f"fetcher.job.failed.{jobs.failed.job_id}"
    printed = json.loads(lines[0])
    assert printed["ce_id"] == f"fetcher.job.completed.{job['id']}"
    assert printed["data"] == event.payload
    assert printed["tenant"] == "single-tenant"


async def test_events_tail_follows_the_feed(stack: Stack, jobs: Jobs) -> None:
    job = jobs.job
    items = await stack.api.feed_items(job["id"])
    assert len(items) == 1
    after = str(int(items[0]["cursor"]) - 1)
    code, out, err = await fetcher(
        stack, "events", "tail", "--feed", stack.manager.base_url, "--after", after, "--count", "1"
    )
    assert code == 0, err
    line = out.decode().strip()
    assert line.split(" ")[1:3] == ["completed", job["id"]]
    assert f"path={job['resultPath']}" in line
