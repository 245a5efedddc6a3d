"""The outbox relay and repairer (contract §8.6, §2.12).

Every terminal transition commits its event row with the status. Right after the commit the
relay publishes it (``kick``); every 30 s the repairer claims batches of 25 unsent rows older
than 10 s, oldest first, and keeps going until none remain or a publish fails. A row whose
publish succeeded but whose ``sent_at`` write failed is simply sent again: delivery is
at-least-once with a stable ``ce-id``.

Each row is signed with its tenant's external key (§8.5, §12.5), the tenant read from the
headers stored with the row (``X-Tenant-ID``; absent for the tenant ``""``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from fetcher.crypto import KeySet
from fetcher.services.events import signed_headers
from fetcher.services.metrics import Metrics
from fetcher.services.ports import Outbox
from fetcher.services.records import OutboxRow
from fetcher.services.runtime_ports import EventPublisher
from fetcher.services.timeutil import SystemClock

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
        try:
            await self.publisher.publish_event(event.routing_key, event.body, headers)
        except Exception as exc:
            log.warning("event %s not published yet: %s", event.ce_id, exc)
            return False
        self.metrics.events_published.labels(event.event_type).inc()
        log.info("event %s published", event.routing_key, extra={"job_id": event.job_id})
        return True
