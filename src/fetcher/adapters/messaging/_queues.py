"""A small asyncio helper both work sources use (in-process and RabbitMQ)."""

from __future__ import annotations

import asyncio
from typing import TypeVar

__all__ = ["get_or_stop"]

_T = TypeVar("_T")


async def get_or_stop(queue: asyncio.Queue[_T], stopped: asyncio.Event) -> _T | None:
    """The next item, or ``None`` once ``stopped`` is set; an item taken from the queue is put
    back when it cannot be handed over (stopped meanwhile, or the caller was cancelled)."""
    if stopped.is_set():
        return None
    getter = asyncio.ensure_future(queue.get())
    stopper = asyncio.ensure_future(stopped.wait())
    handed_over = False
    try:
        await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        handed_over = getter.done() and not stopped.is_set()
        return getter.result() if handed_over else None
    finally:
        stopper.cancel()
        getter.cancel()
        if not handed_over and getter.done() and not getter.cancelled():
            queue.put_nowait(getter.result())
