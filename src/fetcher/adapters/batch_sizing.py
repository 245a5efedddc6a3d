"""Rows per fetch, bounded by bytes (contract §4.3 step 3, §13 "Bounded memory").

Connectors stream a table in batches. A fixed row count bounds memory only when rows are
narrow: 2,000 rows of 150 kB text are 300 MB before the first byte is written, held several
times over (the driver's buffer, the Python values, the encoded document bytes), and a
Worker extracting such a table peaked at 1.4 GiB. A :class:`BatchSizer` starts with a small
fetch, estimates the bytes a row holds from a sample of each batch (:func:`row_bytes`), and
sizes the next fetch so that a batch holds about ``target_bytes``, never more than
``max_rows`` rows and never fewer than one.

The estimate follows the data, one batch behind: narrow rows reach ``max_rows`` from the second
fetch on, as before; a wide batch shrinks the next fetch at once. A table whose rows widen
abruptly can overshoot for one batch, and one row is always fetched whole (a single value is
never split).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import islice
from typing import Final

__all__ = ["BATCH_TARGET_BYTES", "FIRST_BATCH_ROWS", "BatchSizer", "row_bytes"]

#: About this many bytes of values per fetched batch.
BATCH_TARGET_BYTES: Final = 1 * 1024 * 1024
#: The first fetch of a stream, before any row has been seen: one row, since nothing bounds
#: its width yet (eight rows of 15 MB were one 120 MB batch); narrow rows pay one more fetch.
FIRST_BATCH_ROWS: Final = 1
#: Rows of a batch that :meth:`BatchSizer.observe` measures (evenly spaced).
_SAMPLE_ROWS: Final = 16
#: Items of one container that :func:`row_bytes` visits; longer ones are extrapolated.
_SAMPLE_ITEMS: Final = 32
#: Containers nested deeper than this count as :data:`_SCALAR_BYTES` each.
_MAX_DEPTH: Final = 6
#: A number, a boolean, a date or ``None``.
_SCALAR_BYTES: Final = 8


def row_bytes(value: object, depth: int = 0) -> int:
    """About how many bytes ``value`` (a row, a document or one of their values) holds: text
    and binary values by length, containers by a sample of their items (keys included),
    anything else :data:`_SCALAR_BYTES`. Bounded work whatever the value's size or depth."""
    if isinstance(value, str | bytes | bytearray | memoryview):
        return len(value)
    if depth >= _MAX_DEPTH:
        return _SCALAR_BYTES
    if isinstance(value, Mapping):
        items: Sequence[object] = list(islice(value.items(), _SAMPLE_ITEMS))
    elif isinstance(value, list | tuple):
        items = value[:_SAMPLE_ITEMS]
    else:
        return _SCALAR_BYTES
    if not items:
        return _SCALAR_BYTES
    sampled = sum(row_bytes(item, depth + 1) for item in items)
    return sampled * len(value) // len(items)


class BatchSizer:
    """How many rows the next fetch of one stream asks for (see the module's docstring)."""

    __slots__ = ("_max_rows", "_rows", "_target_bytes")

    def __init__(
        self,
        max_rows: int,
        *,
        target_bytes: int = BATCH_TARGET_BYTES,
        first_rows: int = FIRST_BATCH_ROWS,
    ) -> None:
        if max_rows < 1 or target_bytes < 1 or first_rows < 1:
            raise ValueError("batch sizes must be positive")
        self._max_rows = max_rows
        self._target_bytes = target_bytes
        self._rows = min(first_rows, max_rows)

    @property
    def rows(self) -> int:
        """The row count of the next fetch."""
        return self._rows

    def observe(self, batch: Sequence[object]) -> None:
        """Size the next fetch from ``batch`` (rows or documents just fetched)."""
        if not batch:
            return
        step = max(1, len(batch) // _SAMPLE_ROWS)
        sample = batch[::step][:_SAMPLE_ROWS]
        per_row = max(1, sum(row_bytes(row) for row in sample) // len(sample))
        fitting = max(1, self._target_bytes // per_row)
        self._rows = min(self._max_rows, fitting)
