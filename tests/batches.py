"""The batch sizes a connector streams narrow rows in (``fetcher.adapters.batch_sizing``)."""

from __future__ import annotations

from fetcher.adapters.batch_sizing import FIRST_BATCH_ROWS


def narrow_batches(rows: int, batch_size: int) -> list[int]:
    """A first fetch of ``FIRST_BATCH_ROWS`` rows, then ``batch_size`` rows a fetch."""
    sizes, size = [], min(FIRST_BATCH_ROWS, batch_size)
    while rows > 0:
        sizes.append(min(size, rows))
        rows -= sizes[-1]
        size = batch_size
    return sizes
