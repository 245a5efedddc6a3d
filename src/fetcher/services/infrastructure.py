"""Ports the use cases and hosts need besides the metadata store: object storage, messaging
and the bearer-token authenticator.

Adapters implement them (``fetcher.adapters.objectstore.*``, ``fetcher.adapters.messaging.*``,
``fetcher.adapters.auth``); services and hosts never import adapters (the bootstrap hands them
over).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from fetcher.services.principal import Principal

__all__ = [
    "Authenticator",
    "Delivery",
    "HeaderCarrier",
    "RequestHeaders",
    "EventPublisher",
    "ObjectStore",
    "ObjectWriter",
    "WorkPublisher",
    "WorkSource",
]


class ObjectWriter(Protocol):
    """An object being written. ``write`` takes the stored bytes (already encrypted)."""

    async def write(self, chunk: bytes) -> None: ...


class ObjectStore(Protocol):
    """Where result objects go (§6.3).

    ``open_writer(key)`` is an async context manager: the object appears at ``key`` only when
    the block exits cleanly; on an exception (or cancellation) nothing may remain at the key —
    an aborted multipart upload, or a temporary file removed (§4.3 step 5). Failures raise
    ``EngineError(UNAVAILABLE, "failed to store result", detail=…)``.
    """

    def open_writer(self, key: str) -> AbstractAsyncContextManager[ObjectWriter]: ...

    async def read(self, key: str) -> bytes:
        """The stored bytes at ``key`` (consumers, tests and the demo)."""
        ...

    async def exists(self, key: str) -> bool: ...

    async def delete(self, key: str) -> None:
        """Remove the object at ``key``; a missing one is no error (§14.4: the object of a job
        canceled while its completion was being recorded). Failures raise ``EngineError``."""
        ...

    async def size(self, key: str) -> int:
        """The stored size of the object at ``key`` in bytes (§14.2); a missing object raises
        ``EngineError(NOT_FOUND, …)``, any other failure ``EngineError(UNAVAILABLE, …)``."""
        ...

    def read_range(self, key: str, start: int, end: int) -> AsyncIterator[bytes]:
        """Bytes ``start`` to ``end`` (inclusive, within the object) of the object at ``key``,
        streamed in bounded chunks (S3 ranged ``GetObject``, or a file read a chunk at a time):
        never the whole object in memory (§14.2). Errors as :meth:`size`."""
        ...

    async def check(self) -> None:
        """Readiness probe: ``HeadBucket`` or a writable directory (§2.10)."""
        ...


class WorkPublisher(Protocol):
    """Publishes signed work messages (§7). Raises on any failure to get a confirm."""

    async def publish_work(self, body: bytes, headers: Mapping[str, str | int]) -> None: ...


class EventPublisher(Protocol):
    """Publishes one job event (§8): headers are the CloudEvents headers plus the signing
    headers. MUST return only after the broker (or bus) accepted it, and raise otherwise."""

    async def publish_event(
        self, routing_key: str, body: bytes, headers: Mapping[str, str]
    ) -> None: ...


class Delivery(Protocol):
    """One work message as received (§7.4). Exactly one of ``ack``/``reject`` is called."""

    @property
    def body(self) -> bytes: ...

    @property
    def headers(self) -> Mapping[str, object]: ...

    @property
    def exchange(self) -> str: ...

    @property
    def routing_key(self) -> str: ...

    async def ack(self) -> None: ...

    async def reject(self) -> None:
        """``basic.reject requeue=false``: the message goes to the dead-letter queue."""
        ...


class WorkSource(Protocol):
    """The Worker's side of the work queue: manual ack, prefetch = the job concurrency."""

    def deliveries(self) -> AsyncIterator[Delivery]:
        """Yield deliveries until :meth:`stop` is called."""
        ...

    async def stop(self) -> None:
        """Stop consuming at once (graceful shutdown step 2, §9.3)."""
        ...


class RequestHeaders(Protocol):
    """A request's headers: ``get`` reads one; a Starlette or httpx header map also lists
    repeated ones (``getlist`` / ``get_list``), which authentication checks for (§12.1)."""

    def get(self, key: str, default: None = None) -> str | None: ...


class HeaderCarrier(Protocol):
    """What authentication reads of a request: its headers (a Starlette request is one; no
    web framework is needed to name it)."""

    @property
    def headers(self) -> RequestHeaders: ...


class Authenticator(Protocol):
    """§12.1 ``AUTH_MODE=jwt``: ``authenticate`` reads the ``Authorization`` header of a
    request (anything with ``headers.get``) and returns its :class:`Principal`, or raises the
    §2.2 ``ApiError`` the guard answers with (401, or 503 while no key set is loaded). The host
    calls ``start`` (key loading in the background) when it starts and ``aclose`` at exit."""

    async def authenticate(self, request: HeaderCarrier) -> Principal: ...

    def start(self) -> None: ...

    async def aclose(self) -> None: ...
