"""A check that calls into C code leave nothing behind: no memory, no reference."""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable, Sequence


def assert_no_leaks(
    calls: Sequence[Callable[[], object]], watched: Sequence[object], *, rounds: int = 200
) -> None:
    """Run every call ``rounds`` times after a warm-up (caches, interned strings): traced
    memory grows by less than 64 KiB, and no object of ``watched`` gains a reference."""
    before = [sys.getrefcount(item) for item in watched]
    for call in calls:
        call()
    tracemalloc.start()
    try:
        for call in calls:
            call()
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(rounds):
            for call in calls:
                call()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown
    assert [sys.getrefcount(item) for item in watched] == before
