"""RabbitMQ over aio-pika: topology, work queue and job events (contract §7, §8.1, §2.10, §9.1).

* :class:`RabbitConnection` opens one robust connection (``connect_robust``) from the §9.1
  ``RABBITMQ_*`` values; it is logged only as ``amqp://[redacted]@host:port/vhost`` (§9.2).
* :func:`declare_topology` declares exactly the §7.1 objects; :func:`declare_events_exchange`
  the §8.1 durable topic exchange.
* :class:`RabbitWorkPublisher` publishes §7.2 work messages to the default exchange with
  publisher confirms; a nack, a timeout, or an unroutable message (no such queue) raises.
* :class:`RabbitEventPublisher` publishes §8.1 events with ``mandatory=true`` and confirms; a
  ``basic.return`` is logged at WARN and the publish still succeeds once confirmed. No
  ``message_id`` is set (§8.1).
* :class:`RabbitWorkSource` consumes with manual ack and QoS prefetch (§7.4); ``reject`` is
  ``basic.reject requeue=false`` (dead-lettered to ``fetcher.dlq``); nothing is ever nacked
  with ``requeue=true``.

Every aio-pika / aiormq failure is translated in :func:`map_rabbitmq_errors` into
:class:`BrokerError` (an ``EngineError`` of category ``UNAVAILABLE``) whose detail never carries
the password.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from fetcher.adapters.messaging._queues import get_or_stop
from fetcher.crypto import REDACTED, Redactor
from fetcher.engine import EngineError, ErrorCategory
from fetcher.lifecycle import AsyncResource
from fetcher.services.infrastructure import Delivery

__all__ = [
    "BrokerError",
    "DLQ",
    "DLQ_ARGUMENTS",
    "DLQ_ROUTING_KEY",
    "DLX",
    "RabbitConnection",
    "RabbitDelivery",
    "RabbitEventPublisher",
    "RabbitWorkPublisher",
    "RabbitWorkSource",
    "declare_events_exchange",
    "declare_topology",
    "map_rabbitmq_errors",
    "work_queue_arguments",
]

log = logging.getLogger(__name__)

#: §7.1 fixed names and arguments.
DLX = "fetcher.dlx"
DLQ = "fetcher.dlq"
DLQ_ROUTING_KEY = "fetcher.dlq.key"
DLQ_ARGUMENTS: Mapping[str, int] = {"x-message-ttl": 604_800_000, "x-max-length": 10_000}
#: §7.2 / §8.1 message properties.
CONTENT_TYPE = "application/json"
PERSISTENT = 2
DEFAULT_CONFIRM_TIMEOUT = 10.0
#: Seconds between reconnection attempts after the broker went away. aio-pika's default (5 s)
#: added up to 5 s of dead time after every outage (chaos suite, broker_cut); a retry a second
#: costs one refused TCP connect while the broker is down.
RECONNECT_INTERVAL = 1.0

_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def work_queue_arguments() -> dict[str, str]:
    """§7.1: the work queue's dead-letter arguments."""
    return {"x-dead-letter-exchange": DLX, "x-dead-letter-routing-key": DLQ_ROUTING_KEY}


class BrokerError(EngineError):
    """A RabbitMQ operation failed (category ``UNAVAILABLE``); ``detail`` is the driver text."""

    def __init__(self, message: str, *, detail: str | None = None) -> None:
        super().__init__(ErrorCategory.UNAVAILABLE, message, detail=detail)


def _scrub(text: str, secrets: Iterable[str]) -> str:
    """A driver text without URL userinfo (§9.2) nor any occurrence of ``secrets`` (the §8.7
    known-value step of :class:`~fetcher.crypto.Redactor`); hosts stay readable."""
    return Redactor(secrets).redact_known(_USERINFO.sub(f"{REDACTED}@", text))


@contextlib.contextmanager
def map_rabbitmq_errors(message: str, *, secrets: Iterable[str] = ()) -> Iterator[None]:
    """The one place broker failures become :class:`BrokerError` (password-free detail)."""
    from aio_pika.exceptions import AMQPError

    try:
        yield
    except EngineError:
        raise
    except (AMQPError, ConnectionError, OSError, RuntimeError, TimeoutError) as exc:
        detail = _scrub(str(exc) or type(exc).__name__, secrets)
        raise BrokerError(message, detail=f"{type(exc).__name__}: {detail}") from exc


class RabbitConnection(AsyncResource):
    """One robust AMQP connection built from the §9.1 ``RABBITMQ_*`` settings."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        user: str,
        password: str,
        vhost: str,
        tls: bool,
        connect_timeout: float = 10.0,
    ) -> None:
        self.host = host
        self.port = port
        self.user = user
        self.vhost = vhost
        self.tls = tls
        self._password = password
        self._connect_timeout = connect_timeout
        self._connection: Any = None
        self._lock = asyncio.Lock()

    @property
    def url(self) -> str:
        """The broker URL for logs: userinfo replaced by ``[redacted]`` (§9.2)."""
        scheme = "amqps" if self.tls else "amqp"
        return f"{scheme}://[redacted]@{self.host}:{self.port}/{quote(self.vhost, safe='')}"

    def __repr__(self) -> str:
        return f"RabbitConnection({self.url!r})"

    def errors(self, message: str) -> contextlib.AbstractContextManager[None]:
        """:func:`map_rabbitmq_errors` scrubbing this connection's password."""
        return map_rabbitmq_errors(message, secrets=(self._password,))

    @property
    def is_open(self) -> bool:
        """Opened, not closed, and currently connected (a robust reconnect is not "open")."""
        connection = self._connection
        if connection is None or connection.is_closed:
            return False
        connected = getattr(connection, "connected", None)
        return connected is None or bool(connected.is_set())

    async def open(self) -> None:
        """Connect (idempotent); an unreachable broker raises :class:`BrokerError`."""
        import aio_pika

        async with self._lock:
            if self._connection is not None:
                return
            log.info("connecting to RabbitMQ at %s", self.url)
            with self.errors("failed to connect to RabbitMQ"):
                self._connection = await aio_pika.connect_robust(
                    host=self.host,
                    port=self.port,
                    login=self.user,
                    password=self._password,
                    virtualhost=self.vhost,
                    ssl=self.tls,
                    ssl_context=ssl.create_default_context() if self.tls else None,
                    timeout=self._connect_timeout,
                    client_properties={"connection_name": "fetcher"},
                    reconnect_interval=RECONNECT_INTERVAL,
                )

    async def close(self) -> None:
        """Close the connection (idempotent)."""
        async with self._lock:
            connection, self._connection = self._connection, None
            if connection is not None and not connection.is_closed:
                with contextlib.suppress(Exception):
                    await connection.close()

    async def channel(self, *, confirms: bool = False, on_return_raises: bool = False) -> Any:
        """A new (robust) channel; the caller closes it."""
        if self._connection is None:
            raise BrokerError("RabbitMQ connection is not open")
        with self.errors("failed to open a RabbitMQ channel"):
            return await self._connection.channel(
                publisher_confirms=confirms, on_return_raises=on_return_raises
            )

    async def check(self) -> None:
        """§2.10 readiness: the connection is open and a channel can be opened."""
        if not self.is_open:
            raise BrokerError("RabbitMQ connection is not open")
        channel = await self.channel()
        with self.errors("failed to open a RabbitMQ channel"):
            await channel.close()

    async def declare_topology(self, work_queue: str) -> None:
        """Declare the §7.1 topology on a short-lived channel."""
        channel = await self.channel()
        try:
            with self.errors("failed to declare the RabbitMQ topology"):
                await declare_topology(channel, work_queue)
        finally:
            await _close_quietly(channel)

    async def declare_events_exchange(self, name: str) -> None:
        """Declare the §8.1 events exchange on a short-lived channel."""
        channel = await self.channel()
        try:
            with self.errors("failed to declare the events exchange"):
                await declare_events_exchange(channel, name)
        finally:
            await _close_quietly(channel)


async def _close_quietly(channel: Any) -> None:
    if channel is not None and not channel.is_closed:
        with contextlib.suppress(Exception):
            await channel.close()


async def declare_topology(channel: Any, work_queue: str) -> None:
    """§7.1, idempotent: ``fetcher.dlx`` (direct, durable), ``fetcher.dlq`` (durable, 7-day TTL,
    10,000 messages) bound with ``fetcher.dlq.key``, and the durable work queue dead-lettering
    to them. Different existing arguments fail with ``PRECONDITION_FAILED``."""
    from aio_pika import ExchangeType

    dlx = await channel.declare_exchange(DLX, ExchangeType.DIRECT, durable=True)
    dlq = await channel.declare_queue(DLQ, durable=True, arguments=dict(DLQ_ARGUMENTS))
    await dlq.bind(dlx, routing_key=DLQ_ROUTING_KEY)
    await channel.declare_queue(work_queue, durable=True, arguments=work_queue_arguments())


async def declare_events_exchange(channel: Any, name: str) -> None:
    """§8.1: the job-events exchange is a durable topic exchange."""
    from aio_pika import ExchangeType

    await channel.declare_exchange(name, ExchangeType.TOPIC, durable=True)


class _Channel:
    """A lazily opened channel shared by one publisher or consumer (safe double close)."""

    def __init__(self, connection: RabbitConnection, *, confirms: bool, on_return_raises: bool):
        self._connection = connection
        self._options = {"confirms": confirms, "on_return_raises": on_return_raises}
        self._channel: Any = None
        self._lock = asyncio.Lock()

    async def get(self) -> Any:
        async with self._lock:
            if self._channel is None or self._channel.is_closed:
                await _close_quietly(self._channel)
                self._channel = await self._connection.channel(**self._options)
            return self._channel

    async def close(self) -> None:
        async with self._lock:
            channel, self._channel = self._channel, None
            await _close_quietly(channel)


class _Publisher(AsyncResource):
    """What both publishers share: a lazily opened confirmed channel on ``connection``, the
    confirm timeout, and closing (also as an async context manager)."""

    def __init__(
        self, connection: RabbitConnection, confirm_timeout: float, *, on_return_raises: bool
    ) -> None:
        self._connection = connection
        self._timeout = confirm_timeout
        self._channel = _Channel(connection, confirms=True, on_return_raises=on_return_raises)

    async def close(self) -> None:
        await self._channel.close()


class RabbitWorkPublisher(_Publisher):
    """``WorkPublisher`` (§7.1, §7.2): default exchange, routing key = the work queue."""

    def __init__(
        self,
        connection: RabbitConnection,
        queue: str,
        *,
        confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT,
    ) -> None:
        # mandatory + on_return_raises: a message no queue accepts is an error, not a silent drop.
        super().__init__(connection, confirm_timeout, on_return_raises=True)
        self.queue = queue

    def __repr__(self) -> str:
        return f"RabbitWorkPublisher(queue={self.queue!r}, broker={self._connection.url!r})"

    async def publish_work(self, body: bytes, headers: Mapping[str, str | int]) -> None:
        """Publish persistently and wait for the broker's confirm; raise otherwise."""
        from aio_pika import DeliveryMode, Message
        from pamqp.commands import Basic

        message = Message(
            body,
            headers=dict(headers),
            content_type=CONTENT_TYPE,
            delivery_mode=DeliveryMode.PERSISTENT,
        )
        with self._connection.errors("failed to publish the work message"):
            channel = await self._channel.get()
            confirmation = await channel.default_exchange.publish(
                message, routing_key=self.queue, mandatory=True, timeout=self._timeout
            )
        if not isinstance(confirmation, Basic.Ack):
            raise BrokerError(
                "failed to publish the work message", detail=f"no broker ack: {confirmation!r}"
            )


class _NoMessageId(str):
    """An empty ``message_id`` that aiormq treats as "already set" (so it does not invent a
    random one) and pamqp leaves off the wire (it skips empty properties): §8.1 says events
    carry no ``message_id``."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return True


#: aiormq's log line for a ``basic.return`` it cannot correlate (there is no message_id).
_UNCORRELATED_RETURN = "message_id if None on returned message %r"


def _log_returned_event(returned: Any) -> None:
    """§8.1: a ``basic.return`` (no queue bound for the routing key) is logged at WARN."""
    frame = getattr(returned, "delivery", None)
    properties = getattr(getattr(returned, "header", None), "properties", None)
    headers = getattr(properties, "headers", None) or {}
    log.warning(
        "event returned by RabbitMQ (no queue bound): exchange=%s routing_key=%s reply=%s %s "
        "ce-id=%s",
        getattr(frame, "exchange", "?"),
        getattr(frame, "routing_key", "?"),
        getattr(frame, "reply_code", "?"),
        getattr(frame, "reply_text", "?"),
        headers.get("ce-id", "?"),
    )


class _ReturnFilter(logging.Filter):
    """Turns aiormq's ERROR about an uncorrelated return into our §8.1 WARN."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _UNCORRELATED_RETURN and isinstance(record.args, tuple) and record.args:
            _log_returned_event(record.args[0])
            return False
        return True


_RETURN_FILTER = _ReturnFilter()


def _install_return_filter() -> None:
    logger = logging.getLogger("aiormq.channel")
    if _RETURN_FILTER not in logger.filters:
        logger.addFilter(_RETURN_FILTER)


class RabbitEventPublisher(_Publisher):
    """``EventPublisher`` (§8.1): the events topic exchange, mandatory, confirmed, persistent."""

    def __init__(
        self,
        connection: RabbitConnection,
        exchange: str,
        *,
        confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT,
    ) -> None:
        super().__init__(connection, confirm_timeout, on_return_raises=False)
        self.exchange = exchange

    def __repr__(self) -> str:
        return f"RabbitEventPublisher(exchange={self.exchange!r}, broker={self._connection.url!r})"

    async def publish_event(
        self, routing_key: str, body: bytes, headers: Mapping[str, str]
    ) -> None:
        """Return once the broker confirmed; a ``basic.return`` only logs a WARN (§8.1, §8.6)."""
        from pamqp.commands import Basic

        _install_return_filter()
        properties = Basic.Properties(
            content_type=CONTENT_TYPE,
            delivery_mode=PERSISTENT,
            headers=dict(headers),
            message_id=_NoMessageId(),
        )
        with self._connection.errors("failed to publish the event"):
            channel = await self._channel.get()
            underlay = await channel.get_underlay_channel()
            confirmation = await underlay.basic_publish(
                body,
                exchange=self.exchange,
                routing_key=routing_key,
                properties=properties,
                mandatory=True,
                timeout=self._timeout,
            )
        if isinstance(confirmation, Basic.Ack):
            return
        if getattr(confirmation, "delivery", None) is not None:  # a correlated basic.return
            _log_returned_event(confirmation)
            return
        raise BrokerError("failed to publish the event", detail=f"no broker ack: {confirmation!r}")


class RabbitDelivery:
    """One received work message (``Delivery``, §7.4)."""

    def __init__(self, message: Any, connection: RabbitConnection) -> None:
        self._message = message
        self._connection = connection

    def __repr__(self) -> str:
        return f"RabbitDelivery(routing_key={self.routing_key!r}, tag={self._message.delivery_tag})"

    @property
    def body(self) -> bytes:
        return bytes(self._message.body)

    @property
    def headers(self) -> Mapping[str, object]:
        return dict(self._message.headers or {})

    @property
    def exchange(self) -> str:
        return str(self._message.exchange or "")

    @property
    def routing_key(self) -> str:
        return str(self._message.routing_key or "")

    @property
    def redelivered(self) -> bool:
        return bool(self._message.redelivered)

    async def ack(self) -> None:
        with self._connection.errors("failed to acknowledge the work message"):
            await self._message.ack()

    async def reject(self) -> None:
        """``basic.reject requeue=false``: dead-lettered to ``fetcher.dlq`` (§7.1, §7.4)."""
        with self._connection.errors("failed to reject the work message"):
            await self._message.reject(requeue=False)


class RabbitWorkSource(AsyncResource):
    """``WorkSource`` (§7.4): manual ack, QoS prefetch = ``RABBITMQ_NUMBERS_OF_WORKERS``.

    Messages received but not yet handed out when :meth:`stop` is called stay unacknowledged;
    the broker redelivers them when the channel closes (they are never nacked).
    """

    def __init__(self, connection: RabbitConnection, queue: str, prefetch: int) -> None:
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        self._connection = connection
        self.queue = queue
        self.prefetch = prefetch
        self._channel = _Channel(connection, confirms=False, on_return_raises=False)
        self._buffer: asyncio.Queue[Any] = asyncio.Queue()
        self._stopped = asyncio.Event()
        self._consumer: tuple[Any, str] | None = None
        self._start_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"RabbitWorkSource(queue={self.queue!r}, prefetch={self.prefetch})"

    async def _start(self) -> None:
        async with self._start_lock:
            if self._consumer is None and not self._stopped.is_set():
                await self._consume()

    async def _consume(self) -> None:
        with self._connection.errors("failed to consume the work queue"):
            channel = await self._channel.get()
            await channel.set_qos(prefetch_count=self.prefetch)
            queue = await channel.declare_queue(self.queue, passive=True)
            tag = await queue.consume(self._buffer.put, no_ack=False)
        self._consumer = (queue, tag)
        if self._stopped.is_set():  # stop() ran while the consumer was being registered
            await self.stop()

    async def deliveries(self) -> AsyncIterator[Delivery]:
        """Yield deliveries until :meth:`stop` is called."""
        if self._stopped.is_set():
            return
        await self._start()
        while True:
            message = await get_or_stop(self._buffer, self._stopped)
            if message is None:
                return
            yield RabbitDelivery(message, self._connection)

    async def stop(self) -> None:
        """Stop consuming at once (``basic.cancel``); idempotent, never raises (§9.3 step 2)."""
        self._stopped.set()
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        queue, tag = consumer
        try:
            with self._connection.errors("failed to cancel the consumer"):
                await queue.cancel(tag)
        except BrokerError as exc:
            log.warning("stopping the work consumer: %s", exc.text())

    async def close(self) -> None:
        """Stop, then close the channel: unacknowledged messages return to the queue."""
        await self.stop()
        await self._channel.close()
