"""A complete Fetcher job-events consumer on aio-pika, built on the consumer kit.

It declares its own durable queue, binds it to ``job.completed`` and ``job.failed`` on the
events exchange, and for each delivery:

1. verifies the message (``verify_event``: §8.5 signature over the delivered exchange and
   routing key, freshness, tenant, schema) — a rejected message is dead-lettered;
2. deduplicates on ``ce-id`` — a repeated event is acknowledged without reprocessing;
3. for ``job.completed``, downloads the result, verifies its GCM tag and HMAC before reading a
   row (``open_result``), and prints the row count of each table; for ``job.failed``, prints
   the sanitized error;
4. acknowledges only after processing succeeded (a failure releases the ``ce-id`` claim and
   requeues the message once, so a transient storage outage does not lose the event).

Run it (keys from ``fetcher derive-key`` and ``fetcher derive-key --purpose storage``)::

    export FETCHER_EXTERNAL_KEY=… FETCHER_STORAGE_KEY=…
    export OBJECT_STORAGE_BUCKET=fetcher-results OBJECT_STORAGE_ENDPOINT=http://127.0.0.1:8333 \
           OBJECT_STORAGE_ACCESS_KEY_ID=… OBJECT_STORAGE_SECRET_KEY=…
    python examples/consumer.py --amqp amqp://guest:guest@127.0.0.1:5672/ \
           --exchange fetcher.job.events --queue my-team.fetcher.events

Add ``--dedup-dsn postgresql://…`` to share deduplication between replicas (PostgreSQL).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

import aio_pika

from fetcher.consumer import (
    ConsumerKeys,
    Deduplicator,
    EventError,
    IntegrityError,
    JobCompleted,
    JobEvent,
    MemoryDeduplicator,
    PostgresDeduplicator,
    S3Source,
    open_result,
    verify_event,
)


def say(text: str) -> None:
    print(text, flush=True)


async def process(event: JobEvent, s3: S3Source, keys: ConsumerKeys) -> None:
    """The application's work: here, print the row count of every table of the result."""
    if not isinstance(event, JobCompleted):
        say(f"failed {event.job_id}: {event.error_message}")
        return
    async with await open_result(event, s3, keys) as result:
        counts = await asyncio.to_thread(result.row_counts)  # local disk + CPU: off the loop
    tables = " ".join(f"{ds}.{t}={n}" for ds, ts in counts.items() for t, n in ts.items())
    say(f"completed {event.job_id} rows={event.result.row_count} {tables}".rstrip())


async def handle(message: Any, *, keys: ConsumerKeys, dedup: Deduplicator, s3: S3Source) -> None:
    """Verify → deduplicate → process → ack, with the outcome tied to the handler's result."""
    try:
        event = verify_event(
            message.headers or {},
            message.body,
            exchange=message.exchange or "",
            routing_key=message.routing_key or "",
            keys=keys,
        )
    except EventError as exc:
        say(f"rejected {type(exc).__name__}: {exc}")
        await message.reject(requeue=False)
        return
    if not await dedup.claim(event.ce_id):
        say(f"duplicate {event.ce_id}")
        await message.ack()
        return
    try:
        await process(event, s3, keys)
    except IntegrityError as exc:  # a tampered or truncated result: never retried
        say(f"integrity failure {event.job_id}: {exc}")
        await message.reject(requeue=False)
        return
    except Exception as exc:
        await dedup.release(event.ce_id)
        say(f"retrying {event.ce_id} later: {type(exc).__name__}")
        await message.nack(requeue=not message.redelivered)
        return
    await message.ack()


async def consume(args: argparse.Namespace, keys: ConsumerKeys, dedup: Deduplicator) -> None:
    s3 = S3Source(
        os.environ["OBJECT_STORAGE_BUCKET"],
        endpoint_url=os.environ.get("OBJECT_STORAGE_ENDPOINT") or None,
        access_key_id=os.environ.get("OBJECT_STORAGE_ACCESS_KEY_ID") or None,
        secret_access_key=os.environ.get("OBJECT_STORAGE_SECRET_KEY") or None,
    )
    connection = await aio_pika.connect_robust(args.amqp)
    async with connection, s3:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=8)
        exchange = await channel.declare_exchange(
            args.exchange, aio_pika.ExchangeType.TOPIC, durable=True
        )
        queue = await channel.declare_queue(args.queue, durable=True)
        for routing_key in ("job.completed", "job.failed"):
            await queue.bind(exchange, routing_key=routing_key)
        say(f"ready: queue {args.queue} bound to {args.exchange}")
        handled = 0
        async with queue.iterator() as messages:
            async for message in messages:
                await handle(message, keys=keys, dedup=dedup, s3=s3)
                handled += 1
                if args.count is not None and handled >= args.count:
                    return


async def main() -> int:
    parser = argparse.ArgumentParser(description="Consume Fetcher job events.")
    parser.add_argument("--amqp", default=os.environ.get("FETCHER_AMQP_URL", "amqp://localhost/"))
    parser.add_argument("--exchange", default="fetcher.job.events")
    parser.add_argument("--queue", default="example.fetcher.job.events")
    parser.add_argument("--dedup-dsn", help="PostgreSQL DSN for shared deduplication")
    parser.add_argument("--count", type=int, help="stop after this many deliveries")
    args = parser.parse_args()
    keys = ConsumerKeys.from_hex(
        external=os.environ["FETCHER_EXTERNAL_KEY"], storage=os.environ["FETCHER_STORAGE_KEY"]
    )
    if args.dedup_dsn:
        async with PostgresDeduplicator(args.dedup_dsn) as shared:
            await consume(args, keys, shared)
    else:
        await consume(args, keys, MemoryDeduplicator())
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
