"""In-process messaging for embedded mode (contract §1.1, §8.6 "Embedded without a broker").

* :class:`InProcessWorkQueue` is both the ``WorkPublisher`` and the ``WorkSource``: an
  ``asyncio.Queue`` of deliveries shaped like the broker's (exchange ``""``, routing key = the
  queue name, §7.1). ``reject`` stands for ``basic.reject requeue=false`` (§7.4): the message
  lands on :attr:`InProcessWorkQueue.dead_letters` (the most recent :data:`DEAD_LETTER_LIMIT`
  only), never back on the queue.
* :class:`InProcessEventBus` is the ``EventPublisher``: every subscriber receives the same
  routing key, body and headers (§8.6). The bus itself keeps no message (§13 "Bounded memory"):
  it counts what it published (:attr:`InProcessEventBus.published_count`) and forgets it; the
  durable copy of every event is its outbox row, which the event feed (§2.12) serves.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import NamedTuple

from fetcher.adapters.messaging._queues import get_or_stop
from fetcher.services.infrastructure import Delivery

__all__ = [
    "DEAD_LETTER_LIMIT",
    "DEFAULT_WORK_QUEUE",
    "DeliveryState",
    "EventSubscription",
    "InProcessDelivery",
    "InProcessEventBus",
    "InProcessWorkQueue",
    "PublishedEvent",
]

#: §9.1 ``RABBITMQ_FETCHER_WORK_QUEUE`` default.
DEFAULT_WORK_QUEUE = "fetcher.extract-external-data.queue"
#: §13 "Bounded memory": rejected work messages kept for inspection, oldest dropped first.
DEAD_LETTER_LIMIT = 100


class DeliveryState:
    PENDING = "pending"
    ACKED = "acked"
    REJECTED = "rejected"


@dataclass(eq=False)
class InProcessDelivery:
    """One work message as received (``Delivery``); exactly one of ``ack``/``reject``."""

    body: bytes
    headers: Mapping[str, object]
    routing_key: str
    queue: InProcessWorkQueue = field(repr=False)
    exchange: str = ""
    state: str = DeliveryState.PENDING

    def _settle(self, state: str) -> None:
        if self.state != DeliveryState.PENDING:
            raise RuntimeError(f"delivery already {self.state}")
        self.state = state

    async def ack(self) -> None:
        self._settle(DeliveryState.ACKED)

    async def reject(self) -> None:
        """``basic.reject requeue=false``: the message goes to :attr:`dead_letters` (§7.4)."""
        self._settle(DeliveryState.REJECTED)
        self.queue.dead_letters.append(self)


class InProcessWorkQueue:
    """``WorkPublisher`` + ``WorkSource`` over an ``asyncio.Queue`` (embedded mode)."""

    def __init__(self, name: str = DEFAULT_WORK_QUEUE) -> None:
        self.name = name
        self.dead_letters: deque[InProcessDelivery] = deque(maxlen=DEAD_LETTER_LIMIT)
        self._queue: asyncio.Queue[InProcessDelivery] = asyncio.Queue()
        self._stopped = asyncio.Event()

    def __repr__(self) -> str:
        return f"InProcessWorkQueue(name={self.name!r}, waiting={self._queue.qsize()})"

    @property
    def waiting(self) -> int:
        """Messages published and not yet handed to a consumer."""
        return self._queue.qsize()

    async def publish_work(self, body: bytes, headers: Mapping[str, str | int]) -> None:
        """Enqueue one work message (§7.2): exchange ``""``, routing key = the queue name."""
        frozen = MappingProxyType(dict(headers))
        self._queue.put_nowait(
            InProcessDelivery(body=bytes(body), headers=frozen, routing_key=self.name, queue=self)
        )

    async def deliveries(self) -> AsyncIterator[Delivery]:
        """Yield deliveries until :meth:`stop` is called; undelivered messages stay queued."""
        while True:
            item = await get_or_stop(self._queue, self._stopped)
            if item is None:
                return
            yield item

    async def stop(self) -> None:
        """Stop consuming at once: every :meth:`deliveries` iterator ends (§9.3 step 2)."""
        self._stopped.set()


class PublishedEvent(NamedTuple):
    """One event as published: ``(routing_key, body, headers)``, what each subscriber gets."""

    routing_key: str
    body: bytes
    headers: Mapping[str, str]


class EventSubscription:
    """A subscriber's own unbounded queue; iterate it, and close it (or ``async with``)."""

    def __init__(self, bus: InProcessEventBus) -> None:
        self._bus = bus
        self._queue: asyncio.Queue[PublishedEvent] = asyncio.Queue()
        self._closed = asyncio.Event()

    def _offer(self, event: PublishedEvent) -> None:
        if not self._closed.is_set():
            self._queue.put_nowait(event)

    async def get(self) -> PublishedEvent:
        """The next event (waits); raises ``StopAsyncIteration`` once closed and drained."""
        if not self._queue.empty():
            return self._queue.get_nowait()
        event = await get_or_stop(self._queue, self._closed)
        if event is None:
            raise StopAsyncIteration
        return event

    def __aiter__(self) -> EventSubscription:
        return self

    async def __anext__(self) -> PublishedEvent:
        return await self.get()

    def close(self) -> None:
        """Unsubscribe (idempotent); iteration ends once the queued events are consumed."""
        self._closed.set()
        self._bus._unsubscribe(self)

    async def __aenter__(self) -> EventSubscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class InProcessEventBus:
    """``EventPublisher`` for embedded mode without a broker (§8.6).

    Nothing is retained after delivery (§13 "Bounded memory"): an event lives only in the
    queues of the subscribers that existed when it was published, until they consume it.
    """

    def __init__(self) -> None:
        self.published_count = 0
        self._subscribers: list[EventSubscription] = []

    def __repr__(self) -> str:
        return (
            f"InProcessEventBus(published={self.published_count}, "
            f"subscribers={len(self._subscribers)})"
        )

    def subscribe(self) -> EventSubscription:
        """A new subscription receiving every event published from now on."""
        subscription: EventSubscription = EventSubscription(self)
        self._subscribers.append(subscription)
        return subscription

    def _unsubscribe(self, subscription: EventSubscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    async def publish_event(
        self, routing_key: str, body: bytes, headers: Mapping[str, str]
    ) -> None:
        """Deliver to every subscriber; returns once all of them have it queued."""
        self.published_count += 1
        if not self._subscribers:
            return
        event = PublishedEvent(routing_key, bytes(body), MappingProxyType(dict(headers)))
        for subscription in list(self._subscribers):
            subscription._offer(event)
