"""An overall deadline for a command that talks to a server (``fetcher jobs list --timeout``).

httpx's timeouts bound each connect and each read, not a whole answer: a server that sends one
byte every 20 s never trips a 30 s read timeout and can hold a command for ever. The deadline
is a real-time interval timer (``SIGALRM``) whose handler raises :class:`DeadlineExceeded` in
the main thread, wherever it is blocked — in ``recv``, in a DNS lookup, between pages.

Only the main thread receives signals, so elsewhere (a command called from a worker thread in
a test) the deadline is not armed; the command line always runs in the main thread.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["DeadlineExceeded", "deadline"]


class DeadlineExceeded(Exception):
    """The command's overall deadline passed."""


def _expired(signum: int, frame: FrameType | None) -> None:
    raise DeadlineExceeded


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`DeadlineExceeded` in the block once ``seconds`` have passed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
