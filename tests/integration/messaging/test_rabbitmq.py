"""The RabbitMQ adapter against a real broker (contract §7.1, §7.2, §7.4, §8.1, §2.10)."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from typing import Any

import pytest
from aio_pika import DeliveryMode, ExchangeType
from aio_pika.exceptions import ChannelPreconditionFailed

from fetcher.adapters.messaging.rabbitmq import (
    DLQ,
    DLQ_ARGUMENTS,
    DLQ_ROUTING_KEY,
    DLX,
    BrokerError,
    RabbitConnection,
    RabbitEventPublisher,
    RabbitWorkPublisher,
    RabbitWorkSource,
    work_queue_arguments,
)
from fetcher.engine.errors import ErrorCategory
from fetcher.services.infrastructure import Delivery, EventPublisher, WorkPublisher, WorkSource
from tests.integration.messaging.conftest import Names, broker_options

pytestmark = pytest.mark.integration

EVENT_HEADERS = {
    "ce-specversion": "1.0",
    "ce-id": "fetcher.job.completed.0190a1b2-0000-7000-8000-000000000001",
    "ce-source": "//lerian.fetcher/worker",
    "ce-type": "studio.lerian.job.completed",
    "ce-time": "2026-07-13T18:04:11.204Z",
    "ce-subject": "0190a1b2-0000-7000-8000-000000000001",
    "ce-resourcetype": "job",
    "ce-eventtype": "completed",
    "ce-schemaversion": "2.0.0",
    "ce-datacontenttype": "application/json",
    "ce-tenantid": "single-tenant",
    "t": "1700000000",
    "signature-version": "v1",
    "x-message-signature": "ab" * 32,
}


def _work_headers(job_id: str) -> dict[str, str | int]:
    return {
        "jobId": job_id,
        "x-request-id": "req-1",
        "x-retry-count": 0,
        "t": "1700000000",
        "signature-version": "v1",
        "x-message-signature": "cd" * 32,
    }


async def _next(source: RabbitWorkSource) -> Delivery:
    return await asyncio.wait_for(anext(aiter(source.deliveries())), 10)


async def _ready_count(rabbit: RabbitConnection, queue: str) -> int:
    channel = await rabbit.channel()
    try:
        declared = await channel.declare_queue(queue, passive=True)
        return int(declared.declaration_result.message_count)
    finally:
        await channel.close()


async def _get(rabbit: RabbitConnection, queue: str) -> Any:
    """One message by ``basic.get`` (acknowledged), waiting briefly for it to arrive."""
    channel = await rabbit.channel()
    try:
        declared = await channel.declare_queue(queue, passive=True)
        for _ in range(50):
            message = await declared.get(no_ack=True, fail=False)
            if message is not None:
                return message
            await asyncio.sleep(0.1)
        raise AssertionError(f"no message arrived on {queue}")
    finally:
        await channel.close()


def test_the_adapters_satisfy_the_ports() -> None:
    connection = RabbitConnection(**broker_options(password="hunter22-secret"))
    publisher: WorkPublisher = RabbitWorkPublisher(connection, "q")
    source: WorkSource = RabbitWorkSource(connection, "q", prefetch=5)
    events: EventPublisher = RabbitEventPublisher(connection, "x")
    text = " ".join(repr(item) for item in (connection, publisher, source, events))
    assert "hunter22-secret" not in text
    assert "[redacted]@" in connection.url


# -- §7.1 topology -------------------------------------------------------------------------------


async def test_topology_is_declared_with_exactly_the_contract_arguments(
    rabbit: RabbitConnection, names: Names
) -> None:
    work = names.queue("work")
    await rabbit.declare_topology(work)
    await rabbit.declare_topology(work)  # idempotent
    channel = await rabbit.channel()
    try:
        # The same arguments succeed: they are exactly what is stored on the broker.
        await channel.declare_queue(work, durable=True, arguments=work_queue_arguments())
        await channel.declare_queue(DLQ, durable=True, arguments=dict(DLQ_ARGUMENTS))
        await channel.declare_exchange(DLX, ExchangeType.DIRECT, durable=True)
    finally:
        await channel.close()
    assert work_queue_arguments() == {
        "x-dead-letter-exchange": "fetcher.dlx",
        "x-dead-letter-routing-key": "fetcher.dlq.key",
    }
    assert dict(DLQ_ARGUMENTS) == {"x-message-ttl": 604800000, "x-max-length": 10000}
    assert (DLX, DLQ, DLQ_ROUTING_KEY) == ("fetcher.dlx", "fetcher.dlq", "fetcher.dlq.key")


@pytest.mark.parametrize(
    "declare",
    [
        pytest.param(lambda ch, work: ch.declare_queue(work, durable=True), id="work-no-dlx"),
        pytest.param(
            lambda ch, work: ch.declare_queue(
                work,
                durable=True,
                arguments={**work_queue_arguments(), "x-dead-letter-routing-key": "other"},
            ),
            id="work-other-dlq-key",
        ),
        pytest.param(
            lambda ch, work: ch.declare_queue(
                work, durable=False, arguments=work_queue_arguments()
            ),
            id="work-transient",
        ),
        pytest.param(
            lambda ch, work: ch.declare_queue(
                DLQ, durable=True, arguments={**DLQ_ARGUMENTS, "x-message-ttl": 1000}
            ),
            id="dlq-other-ttl",
        ),
        pytest.param(
            lambda ch, work: ch.declare_queue(
                DLQ, durable=True, arguments={"x-message-ttl": 604800000}
            ),
            id="dlq-no-max-length",
        ),
        pytest.param(
            lambda ch, work: ch.declare_exchange(DLX, ExchangeType.TOPIC, durable=True),
            id="dlx-topic",
        ),
        pytest.param(
            lambda ch, work: ch.declare_exchange(DLX, ExchangeType.DIRECT, durable=False),
            id="dlx-transient",
        ),
    ],
)
async def test_different_topology_arguments_are_refused_by_the_broker(
    rabbit: RabbitConnection, names: Names, declare: Any
) -> None:
    work = names.queue("work")
    await rabbit.declare_topology(work)
    channel = await rabbit.channel()
    try:
        with pytest.raises(ChannelPreconditionFailed):
            await declare(channel, work)
    finally:
        await channel.close()


async def test_declaring_over_a_conflicting_queue_is_a_broker_error(
    rabbit: RabbitConnection, names: Names
) -> None:
    work = names.queue("work")
    channel = await rabbit.channel()
    await channel.declare_queue(work, durable=True)
    await channel.close()
    with pytest.raises(BrokerError) as caught:
        await rabbit.declare_topology(work)
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert "PRECONDITION_FAILED" in (caught.value.detail or "")
    await rabbit.check()  # the connection survives a channel-level error


async def test_the_events_exchange_is_a_durable_topic(
    rabbit: RabbitConnection, names: Names
) -> None:
    exchange = names.exchange("events")
    await rabbit.declare_events_exchange(exchange)
    await rabbit.declare_events_exchange(exchange)
    channel = await rabbit.channel()
    try:
        await channel.declare_exchange(exchange, ExchangeType.TOPIC, durable=True)
        with pytest.raises(ChannelPreconditionFailed):
            await channel.declare_exchange(exchange, ExchangeType.DIRECT, durable=True)
    finally:
        await channel.close()


# -- §7.2 / §7.4 work messages -------------------------------------------------------------------


async def test_work_message_properties_and_route(rabbit: RabbitConnection, names: Names) -> None:
    work = names.queue("work")
    await rabbit.declare_topology(work)
    async with RabbitWorkPublisher(rabbit, work) as publisher:
        await publisher.publish_work(b'{"jobId":"j1"}', _work_headers("j1"))
    message = await _get(rabbit, work)
    assert message.body == b'{"jobId":"j1"}'
    assert message.content_type == "application/json"
    assert message.delivery_mode == DeliveryMode.PERSISTENT
    assert message.exchange == ""
    assert message.routing_key == work
    assert message.headers == _work_headers("j1")


async def test_publish_consume_ack(rabbit: RabbitConnection, names: Names) -> None:
    work = names.queue("work")
    await rabbit.declare_topology(work)
    body = json.dumps({"jobId": "j2"}).encode()
    async with RabbitWorkPublisher(rabbit, work) as publisher:
        await publisher.publish_work(body, _work_headers("j2"))
    async with RabbitWorkSource(rabbit, work, prefetch=5) as source:
        delivery = await _next(source)
        assert delivery.body == body
        assert dict(delivery.headers) == _work_headers("j2")
        assert delivery.headers["x-retry-count"] == 0
        assert (delivery.exchange, delivery.routing_key) == ("", work)
        await delivery.ack()
    assert await _ready_count(rabbit, work) == 0


async def test_reject_dead_letters_to_the_dlq(rabbit: RabbitConnection, names: Names) -> None:
    work = names.queue("work")
    await rabbit.declare_topology(work)
    marker = f"reject-{secrets.token_hex(8)}"
    async with RabbitWorkPublisher(rabbit, work) as publisher:
        await publisher.publish_work(marker.encode(), {"jobId": marker})
    async with RabbitWorkSource(rabbit, work, prefetch=1) as source:
        await (await _next(source)).reject()
    assert await _ready_count(rabbit, work) == 0
    dead = await _take_from_dlq(rabbit, marker)
    assert dead.headers["jobId"] == marker
    assert dead.headers["x-first-death-queue"] == work
    assert dead.headers["x-first-death-reason"] == "rejected"


async def _take_from_dlq(rabbit: RabbitConnection, marker: str) -> Any:
    """Take our own message off the shared DLQ; anything else is put back untouched."""
    channel = await rabbit.channel()
    others = []
    try:
        dlq = await channel.declare_queue(DLQ, passive=True)
        for _ in range(100):
            message = await dlq.get(no_ack=False, fail=False)
            if message is None:
                await asyncio.sleep(0.1)
                continue
            if message.body == marker.encode():
                await message.ack()
                return message
            others.append(message)
        raise AssertionError("the rejected message did not reach the DLQ")
    finally:
        for message in others:
            await message.nack(requeue=True)
        await channel.close()


async def test_prefetch_bounds_unacknowledged_deliveries(
    rabbit: RabbitConnection, names: Names
) -> None:
    work = names.queue("work")
    await rabbit.declare_topology(work)
    async with RabbitWorkPublisher(rabbit, work) as publisher:
        for n in range(3):
            await publisher.publish_work(str(n).encode(), {"jobId": str(n)})
    async with RabbitWorkSource(rabbit, work, prefetch=2) as source:
        iterator = aiter(source.deliveries())
        first = await asyncio.wait_for(anext(iterator), 10)
        second = await asyncio.wait_for(anext(iterator), 10)
        await asyncio.sleep(0.3)
        assert await _ready_count(rabbit, work) == 1  # the third waits on the broker
        await first.ack()
        third = await asyncio.wait_for(anext(iterator), 10)
        assert [d.body for d in (first, second, third)] == [b"0", b"1", b"2"]
        await second.ack()
        await third.ack()


async def test_stop_ends_consumption_at_once(rabbit: RabbitConnection, names: Names) -> None:
    work = names.queue("work")
    await rabbit.declare_topology(work)
    source = RabbitWorkSource(rabbit, work, prefetch=5)
    received: list[bytes] = []

    async def consume() -> None:
        async for delivery in source.deliveries():
            received.append(delivery.body)
            await delivery.ack()

    task = asyncio.create_task(consume())
    async with RabbitWorkPublisher(rabbit, work) as publisher:
        await publisher.publish_work(b"before", {})
        for _ in range(50):
            if received:
                break
            await asyncio.sleep(0.1)
        await source.stop()
        await asyncio.wait_for(task, 2)
        await publisher.publish_work(b"after", {})
    await asyncio.sleep(0.3)
    assert received == [b"before"]
    assert await _ready_count(rabbit, work) == 1
    assert [d async for d in source.deliveries()] == []
    await source.stop()
    await source.close()
    await source.close()


async def test_unacknowledged_deliveries_return_to_the_queue_on_close(
    rabbit: RabbitConnection, names: Names
) -> None:
    work = names.queue("work")
    await rabbit.declare_topology(work)
    async with RabbitWorkPublisher(rabbit, work) as publisher:
        await publisher.publish_work(b"in-flight", {})
    async with RabbitWorkSource(rabbit, work, prefetch=1) as source:
        assert (await _next(source)).body == b"in-flight"
    message = await _get(rabbit, work)
    assert message.body == b"in-flight"
    assert message.redelivered


async def test_publishing_to_a_missing_queue_raises(rabbit: RabbitConnection, names: Names) -> None:
    missing = names.queue("missing")
    async with RabbitWorkPublisher(rabbit, missing) as publisher:
        with pytest.raises(BrokerError) as caught:
            await publisher.publish_work(b"x", {})
    assert caught.value.message == "failed to publish the work message"


async def test_consuming_a_missing_queue_raises(rabbit: RabbitConnection, names: Names) -> None:
    async with RabbitWorkSource(rabbit, names.queue("missing"), prefetch=1) as source:
        with pytest.raises(BrokerError):
            await _next(source)


# -- §8.1 events ---------------------------------------------------------------------------------


async def _bound_queue(rabbit: RabbitConnection, names: Names, exchange: str, key: str) -> str:
    queue = names.queue("events-consumer")
    channel = await rabbit.channel()
    try:
        declared = await channel.declare_queue(queue, durable=False, auto_delete=False)
        await declared.bind(exchange, routing_key=key)
    finally:
        await channel.close()
    return queue


async def test_event_reaches_a_bound_queue_with_every_header(
    rabbit: RabbitConnection, names: Names
) -> None:
    exchange = names.exchange("events")
    await rabbit.declare_events_exchange(exchange)
    queue = await _bound_queue(rabbit, names, exchange, "job.completed")
    body = b'{"job_id":"0190a1b2-0000-7000-8000-000000000001","status":"completed"}'
    async with RabbitEventPublisher(rabbit, exchange) as events:
        await events.publish_event("job.completed", body, EVENT_HEADERS)
    message = await _get(rabbit, queue)
    assert message.body == body
    assert message.headers == EVENT_HEADERS
    assert message.content_type == "application/json"
    assert message.delivery_mode == DeliveryMode.PERSISTENT
    assert message.message_id is None
    assert (message.exchange, message.routing_key) == (exchange, "job.completed")


async def test_an_unroutable_event_is_logged_at_warn_and_still_succeeds(
    rabbit: RabbitConnection, names: Names, caplog: pytest.LogCaptureFixture
) -> None:
    exchange = names.exchange("events")
    await rabbit.declare_events_exchange(exchange)
    queue = await _bound_queue(rabbit, names, exchange, "job.completed")
    caplog.set_level(logging.WARNING)
    async with RabbitEventPublisher(rabbit, exchange) as events:
        await events.publish_event("job.failed", b"{}", EVENT_HEADERS)
        await asyncio.sleep(0.2)
        await events.publish_event("job.completed", b"{}", EVENT_HEADERS)  # channel still fine
    returned = [r for r in caplog.records if "returned by RabbitMQ" in r.getMessage()]
    assert len(returned) == 1
    assert returned[0].levelno == logging.WARNING
    assert returned[0].name == "fetcher.adapters.messaging.rabbitmq"
    assert "job.failed" in returned[0].getMessage()
    assert EVENT_HEADERS["ce-id"] in returned[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert (await _get(rabbit, queue)).body == b"{}"


async def test_an_event_to_a_missing_exchange_raises_and_the_publisher_recovers(
    rabbit: RabbitConnection, names: Names
) -> None:
    exchange = names.exchange("events")
    async with RabbitEventPublisher(rabbit, exchange) as events:
        with pytest.raises(BrokerError) as caught:
            await events.publish_event("job.completed", b"{}", EVENT_HEADERS)
        assert "NOT_FOUND" in (caught.value.detail or "")
        await rabbit.declare_events_exchange(exchange)
        await events.publish_event("job.completed", b"{}", EVENT_HEADERS)


# -- connection, readiness, failures -------------------------------------------------------------


async def test_check_and_idempotent_close(rabbit: RabbitConnection) -> None:
    await rabbit.check()
    connection = RabbitConnection(**broker_options())
    await connection.open()
    await connection.open()
    await connection.check()
    await connection.close()
    await connection.close()
    with pytest.raises(BrokerError, match="not open"):
        await connection.check()


async def test_an_unreachable_broker_fails_cleanly() -> None:
    password = "s3cr3t-" + secrets.token_hex(6)
    connection = RabbitConnection(**broker_options(port=1, password=password))
    with pytest.raises(BrokerError) as caught:
        await connection.open()
    await connection.close()
    error = caught.value
    assert error.category is ErrorCategory.UNAVAILABLE
    assert error.message == "failed to connect to RabbitMQ"
    assert password not in f"{error} {error.text()} {error!r}"


async def test_wrong_credentials_fail_without_leaking_the_password() -> None:
    password = "wrong-" + secrets.token_hex(6)
    connection = RabbitConnection(**broker_options(password=password))
    with pytest.raises(BrokerError) as caught:
        await connection.open()
    await connection.close()
    assert password not in caught.value.text()
