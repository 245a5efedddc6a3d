"""One async lifecycle for every resource that opens and closes (ARCHITECTURE example 7).

``async with resource:`` calls :meth:`AsyncResource.open` on entry and always
:meth:`AsyncResource.close` on exit, whatever the body raised. A subclass supplies ``close``
(MUST be safe to call twice, and safe after a failed ``open``) and, when opening does work,
``open``. The standard library only: the server's adapters and the public SDK
(``fetcher.client``, ``fetcher.consumer``) both build on it, and the SDK may import nothing of
the server.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["AsyncResource"]


class AsyncResource(ABC):
    """A resource used as ``async with``: ``open`` on entry, ``close`` on every exit."""

    async def open(self) -> None:
        """Acquire what the resource holds; the default has nothing to acquire."""
        return None

    @abstractmethod
    async def close(self) -> None:
        """Release what the resource holds; idempotent."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
