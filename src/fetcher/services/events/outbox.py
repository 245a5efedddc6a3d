"""The outbox relay and repairer (contract §8.6, §2.12).

Every terminal transition commits its event row with the status. Right after the commit the
relay publishes it (``kick``); every 30 s the repairer claims batches of 25 unsent rows older
than 10 s, oldest first, and keeps going until none remain or a publish fails. A row whose
publish succeeded but whose ``sent_at`` write failed is simply sent again: delivery is
at-least-once with a stable ``ce-id``.

Each row is signed with its tenant's external key (§8.5, §12.5), the tenant read from the
headers stored with the row (``X-Tenant-ID``; absent for the tenant ``""``).

A row stored with its job's trace context (issue 22) is published with it as the CloudEvents
distributed-tracing extension, ``ce-traceparent`` (and ``ce-tracestate``), outside the §8.5
signed set, the same stored value on every (re-)emission; the publish itself is a
``publish <exchange>`` producer span, child of that context, so the job's trace ends with
its event's publish. A row without one is published with neither header nor span.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta

from fetcher.crypto import KeySet
from fetcher.services.events.job_events import event_trace_headers, signed_headers
from fetcher.services.infrastructure import EventPublisher
from fetcher.services.metrics import Metrics
from fetcher.services.records import OutboxEvent, OutboxRow
from fetcher.services.store_roles import Outbox
from fetcher.services.timeutil import SystemClock
from fetcher.services.tracing import AttributeValue, SpanKind, extracted_context, span

__all__ = ["OutboxRelay"]

log = logging.getLogger(__name__)

REPAIR_INTERVAL_SECONDS = 30.0
REPAIR_BATCH = 25
REPAIR_MIN_AGE = timedelta(seconds=10)


@dataclass
class OutboxRelay:
    store: Outbox
    publisher: EventPublisher
    #: The process keys; each event is signed with its tenant's external key (§12.5).
    keys: KeySet = field(repr=False)
    exchange: str
    metrics: Metrics
    clock: SystemClock = field(default_factory=SystemClock)
    repair_interval: float = REPAIR_INTERVAL_SECONDS
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    #: Held for one relay or repair pass; :meth:`drain_all` waits for a pass in flight, so the
    #: shutdown flush cannot find its rows claimed by a pass that is cancelled right after.
    _pass: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    def kick(self) -> None:
        """Ask the running relay to publish fresh rows now (called after a commit)."""
        self._wake.set()

    async def run(self) -> None:
        """Relay on every kick, repair every ``repair_interval``; runs until cancelled."""
        loop = asyncio.get_running_loop()
        next_repair = loop.time()
        while True:
            timeout = max(0.0, next_repair - loop.time())
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            async with self._pass:
                try:
                    if loop.time() >= next_repair:
                        await self.repair()
                        next_repair = loop.time() + self.repair_interval
                    else:
                        await self.drain(min_age=timedelta(0))
                except Exception as exc:  # the next tick retries; the rows stay in the outbox
                    log.warning("outbox relay pass failed: %s", exc)

    async def drain_all(self) -> int:
        """Publish every unsent row now (shutdown flush, embedded hand-off), after the relay
        pass in flight, if any, has finished."""
        async with self._pass:
            await self.store.assign_feed_seq()
            return await self.drain(min_age=timedelta(0))

    async def repair(self) -> int:
        """One repairer tick: number the feed, then drain rows older than 10 s."""
        await self.store.assign_feed_seq()
        published = await self.drain(min_age=REPAIR_MIN_AGE)
        self.metrics.outbox_pending.set(await self.store.count_unsent())
        return published

    async def drain(self, *, min_age: timedelta) -> int:
        """Publish unsent rows created at least ``min_age`` ago, batch after batch, until
        none remain or a publish fails. Returns how many were published."""
        published = 0
        while True:
            created_before = self.clock.now() - min_age + timedelta(milliseconds=1)
            async with self.store.claim_unsent(
                created_before=created_before, limit=REPAIR_BATCH
            ) as batch:
                if not batch.rows:
                    return published
                for row in batch.rows:
                    if not await self._publish(row):
                        return published
                    await batch.mark_sent([row.ce_id], self.clock.now())
                    published += 1
            if len(batch.rows) < REPAIR_BATCH:
                return published

    async def _publish(self, row: OutboxRow) -> bool:
        event = row.event()
        headers = signed_headers(
            self.keys,
            self.exchange,
            event,
            emitted_at=self.clock.now(),
            t=int(time.time()),
        )
        headers.update(event_trace_headers(event))
        try:
            with self._span(event):
                await self.publisher.publish_event(event.routing_key, event.body, headers)
        except Exception as exc:
            log.warning("event %s not published yet: %s", event.ce_id, exc)
            return False
        self.metrics.events_published.labels(event.event_type).inc()
        log.info("event %s published", event.routing_key, extra={"job_id": event.job_id})
        return True

    def _span(self, event: OutboxEvent) -> AbstractContextManager[object]:
        """The producer span of one publish (messaging semantic conventions), child of the
        stored trace context; none for a row stored without one (tracing off, the reaper)."""
        stored = {"traceparent": event.traceparent, "tracestate": event.tracestate}
        parent = extracted_context({k: v for k, v in stored.items() if v is not None})
        if parent is None:
            return nullcontext()
        attributes: dict[str, AttributeValue] = {
            "messaging.system": "rabbitmq",
            "messaging.operation.type": "send",
            "messaging.operation.name": "publish",
            "messaging.destination.name": self.exchange,
            "messaging.rabbitmq.destination.routing_key": event.routing_key,
            "messaging.message.id": event.ce_id,
            "messaging.message.body.size": len(event.body),
        }
        return span(
            f"publish {self.exchange}", kind=SpanKind.PRODUCER, attributes=attributes, parent=parent
        )
