"""In-process work queue and event bus for embedded mode (contract §1.1, §7.4, §8.6)."""

from __future__ import annotations

import asyncio
import tracemalloc

import pytest

from fetcher.adapters.messaging.inprocess import (
    DEAD_LETTER_LIMIT,
    DEFAULT_WORK_QUEUE,
    DeliveryState,
    InProcessEventBus,
    InProcessWorkQueue,
    PublishedEvent,
)
from fetcher.services.infrastructure import Delivery, EventPublisher, WorkPublisher, WorkSource

HEADERS: dict[str, str | int] = {"jobId": "j1", "x-retry-count": 0, "t": "1700000000"}


def test_the_queue_and_bus_satisfy_the_ports() -> None:
    queue = InProcessWorkQueue()
    publisher: WorkPublisher = queue
    source: WorkSource = queue
    events: EventPublisher = InProcessEventBus()
    assert isinstance(publisher, InProcessWorkQueue)
    assert isinstance(source, InProcessWorkQueue)
    assert queue.name == DEFAULT_WORK_QUEUE
    assert "InProcessEventBus" in repr(events)


async def _next(queue: InProcessWorkQueue) -> Delivery:
    return await asyncio.wait_for(anext(aiter(queue.deliveries())), 5)


async def test_publish_then_consume_looks_like_the_broker() -> None:
    queue = InProcessWorkQueue("work.q")
    await queue.publish_work(b'{"jobId":"j1"}', HEADERS)
    delivery = await _next(queue)
    assert delivery.body == b'{"jobId":"j1"}'
    assert dict(delivery.headers) == HEADERS
    assert delivery.exchange == ""
    assert delivery.routing_key == "work.q"
    await delivery.ack()
    assert list(queue.dead_letters) == []
    assert queue.waiting == 0


async def test_messages_keep_their_order() -> None:
    queue = InProcessWorkQueue()
    for n in range(3):
        await queue.publish_work(str(n).encode(), {})
    seen = []
    async for delivery in queue.deliveries():
        seen.append(delivery.body)
        await delivery.ack()
        if len(seen) == 3:
            break
    assert seen == [b"0", b"1", b"2"]


async def test_reject_lands_on_the_dead_letters_never_back_on_the_queue() -> None:
    queue = InProcessWorkQueue()
    await queue.publish_work(b"bad", {"t": "x"})
    delivery = await _next(queue)
    await delivery.reject()
    assert [d.body for d in queue.dead_letters] == [b"bad"]
    assert queue.dead_letters[0].state == DeliveryState.REJECTED
    assert queue.waiting == 0


async def test_a_delivery_is_settled_once() -> None:
    queue = InProcessWorkQueue()
    await queue.publish_work(b"x", {})
    delivery = await _next(queue)
    await delivery.ack()
    with pytest.raises(RuntimeError, match="already acked"):
        await delivery.reject()


async def test_stop_ends_a_waiting_consumer_at_once_and_keeps_the_backlog() -> None:
    queue = InProcessWorkQueue()
    received: list[bytes] = []

    async def consume() -> None:
        async for delivery in queue.deliveries():
            received.append(delivery.body)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    await queue.stop()
    await asyncio.wait_for(task, 1)
    await queue.publish_work(b"late", {})
    assert [d async for d in queue.deliveries()] == []
    assert received == []
    assert queue.waiting == 1


async def test_a_cancelled_consumer_loses_no_message() -> None:
    queue = InProcessWorkQueue()
    task = asyncio.create_task(_next(queue))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await queue.publish_work(b"kept", {})
    assert (await _next(queue)).body == b"kept"


async def test_published_headers_are_a_snapshot() -> None:
    queue = InProcessWorkQueue()
    headers: dict[str, str | int] = {"a": "1"}
    await queue.publish_work(b"x", headers)
    headers["a"] = "2"
    assert (await _next(queue)).headers["a"] == "1"


async def test_every_subscriber_receives_every_event_with_its_headers() -> None:
    bus = InProcessEventBus()
    first, second = bus.subscribe(), bus.subscribe()
    await bus.publish_event("job.completed", b"{}", {"ce-id": "fetcher.job.completed.j1"})
    expected = PublishedEvent("job.completed", b"{}", {"ce-id": "fetcher.job.completed.j1"})
    for subscription in (first, second):
        event = await asyncio.wait_for(subscription.get(), 1)
        assert (event.routing_key, event.body, dict(event.headers)) == (
            expected.routing_key,
            expected.body,
            dict(expected.headers),
        )
    assert bus.published_count == 1
    first.close()
    second.close()


async def test_a_closed_subscription_ends_after_draining() -> None:
    bus = InProcessEventBus()
    async with bus.subscribe() as subscription:
        await bus.publish_event("job.failed", b"1", {})
        await bus.publish_event("job.failed", b"2", {})
    await bus.publish_event("job.failed", b"3", {})
    assert [event.body async for event in subscription] == [b"1", b"2"]
    assert bus.published_count == 3


async def test_a_subscriber_only_sees_events_after_it_subscribed() -> None:
    bus = InProcessEventBus()
    await bus.publish_event("job.completed", b"early", {})
    subscription = bus.subscribe()
    await bus.publish_event("job.completed", b"late", {})
    assert (await subscription.get()).body == b"late"
    subscription.close()
    subscription.close()


async def test_publishing_without_subscribers_succeeds() -> None:
    bus = InProcessEventBus()
    await bus.publish_event("job.completed", b"x", {"ce-id": "1"})
    assert bus.published_count == 1
    assert "published=1" in repr(bus)


async def test_the_dead_letters_keep_only_the_most_recent_rejections() -> None:
    """§13 "Bounded memory": rejected messages cannot pile up without limit."""
    queue = InProcessWorkQueue()
    for n in range(DEAD_LETTER_LIMIT + 20):
        await queue.publish_work(str(n).encode(), {})
        await (await _next(queue)).reject()
    assert len(queue.dead_letters) == DEAD_LETTER_LIMIT
    assert queue.dead_letters[0].body == b"20"
    assert queue.dead_letters[-1].body == str(DEAD_LETTER_LIMIT + 19).encode()


def _traced_bytes() -> int:
    current, _peak = tracemalloc.get_traced_memory()
    return current


@pytest.mark.parametrize("subscribed", [False, True])
async def test_the_bus_keeps_no_delivered_event(subscribed: bool) -> None:
    """§13 "Bounded memory": 64 events of 1 MiB each, every one consumed, leave less than
    4 MiB behind; a bus that kept its history would hold 64 MiB."""
    bus = InProcessEventBus()
    subscription = bus.subscribe() if subscribed else None
    tracemalloc.start()
    try:
        before = _traced_bytes()
        for n in range(64):
            await bus.publish_event("job.completed", bytes([n % 256]) * (1 << 20), {"n": str(n)})
            if subscription is not None:
                assert (await subscription.get()).headers["n"] == str(n)
        grown = _traced_bytes() - before
    finally:
        tracemalloc.stop()
    assert bus.published_count == 64
    assert grown < 4 << 20, f"the bus retained {grown} bytes"
    if subscription is not None:
        subscription.close()
