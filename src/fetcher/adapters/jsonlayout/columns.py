"""Driver rows laid out as §5.4 row objects in C, straight from the driver's values (issue 23;
contract §5.3, §5.4).

A driver hands over each row as a tuple of plain values: asyncmy ``int`` for integers, the
server's text for decimals, dates, times and JSON, ``bytes`` for binary strings; psycopg with
the PostgreSQL connector's loaders ``int``, ``bool``, ``float`` and the §5.3 ``str``. The
general path turns those into §5.3 values column by column in Python and encodes them; here
the C extension (``layout_columns`` in ``_native.c``) writes the same bytes from the
tuples directly: per column a :class:`ColumnKind` says how its values are written (the same
conversion the connector's general path applies, tested byte for byte against it), the
members in key order (code points), JSON texts laid out as :func:`~fetcher.adapters.jsonlayout.
texts.layout_rows` lays them out. The server does no more work than for the general
path.

It declines (``None``) a batch holding anything it does not write exactly as the general path
would: a value of another type than its kind (a ``bool``, ``bytes`` in a text column, a ``str``
in a NUMBER column), an integer ``-0`` in a ``jsonb`` text, a text of another shape (a datetime
the server did not print), JSON that is not exactly one valid value or nests past the bound, a
row of another width, a rows list that changes length during the call, or the module not being
built. The connector then takes its general path for that batch, which also raises whatever
error that batch deserves, so the rows and errors are the same either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, overload

from fetcher.adapters.jsonlayout.fastjson import FastRowBatch, encode_rows
from fetcher.adapters.jsonlayout.texts import layout_value
from fetcher.engine.kit import MAX_JSON_DEPTH, ROW_DEPTH, Row

__all__ = [
    "NATIVE",
    "ColumnKind",
    "ColumnPlan",
    "LaidOutBatch",
    "column_plan",
    "layout_columns",
]

_native: Callable[..., bytes | None] | None
try:
    from fetcher.adapters.jsonlayout._native import layout_columns as _native
except ImportError:  # built without a C compiler: every batch takes the general path
    _native = None

#: Whether the C extension is built; without it every batch takes the general path.
NATIVE: Final = _native is not None


class ColumnKind(IntEnum):
    """How a column's values are written (``None`` is ``null`` for every kind); the numbers
    are the C module's."""

    #: ``int`` (exactly): the number. Anything else declines, a ``str`` that reads as a number
    #: included: the general path writes that as a string (issue 39).
    NUMBER = 0
    #: ``str``: a string.
    STRING = 1
    #: ``str``, MySQL's DATETIME/TIMESTAMP text: ``mysql.datetime_text`` of it.
    DATETIME = 2
    #: ``str``, MySQL's TIME text: ``mysql.time_text`` of it.
    TIME = 3
    #: ``bytes``/``bytearray``: standard base64 with padding.
    BYTES = 4
    #: ``str`` holding one JSON value: the value, laid out (exact numbers, keys sorted).
    JSON = 5
    #: ``str`` as :attr:`STRING`, ``int`` as :attr:`NUMBER`, ``bytes`` as :attr:`BYTES`.
    SCALAR = 6
    #: ``float``: its ``repr``; NaN and the infinities as the §5.3 strings.
    FLOAT = 7
    #: ``bool``: ``true`` or ``false``.
    BOOL = 8
    #: ``str`` (ASCII), PostgreSQL's ``timestamp`` text in an ISO-DateStyle session: §5.3's UTC
    #: text when it has the years-1..9999 shape, infinity, BC and five-digit years as they are
    #: (the connector's ``_DateTimeText``); any other text declines.
    STAMP = 9
    #: ``str``, PostgreSQL's ``timestamptz`` text in a UTC, ISO-DateStyle session: as
    #: :attr:`STAMP`, with the ``+00`` zone.
    ZONED_STAMP = 10
    #: ``str``, PostgreSQL ``jsonb``'s text: as :attr:`JSON`, except that an integer ``-0``
    #: declines. The general path reads jsonb's integers as ``int`` (the server prints them
    #: canonically), which has no negative zero; the fuzzer met the difference (issue 34).
    JSONB = 11


@dataclass(frozen=True, slots=True)
class ColumnPlan:
    """How one query's rows are laid out: the column indices in key order, each one's §5.4
    key literal (``b'"name"'``) and kind, in that order."""

    order: tuple[int, ...]
    keys: tuple[bytes, ...]
    kinds: bytes


def column_plan(names: Sequence[str], kinds: Sequence[ColumnKind]) -> ColumnPlan | None:
    """The plan for columns ``names`` of ``kinds``; ``None`` when there is nothing to lay out
    here: no column, a name twice, a name without UTF-8 (a lone surrogate), or no C module."""
    if _native is None or not names or len(set(names)) != len(names):
        return None
    order = tuple(sorted(range(len(names)), key=names.__getitem__))  # code point order
    keys = []
    for index in order:
        key = layout_value(json.dumps(names[index], ensure_ascii=False), 0)
        if key is None:
            return None
        keys.append(key)
    return ColumnPlan(order, tuple(keys), bytes(kinds[index] for index in order))


def layout_columns(
    rows: Sequence[tuple[object, ...]], plan: ColumnPlan, depth: int = ROW_DEPTH
) -> bytes | None:
    """The §5.4 bytes of ``rows`` as row objects at ``depth``, joined as array elements (as
    ``SelfEncodingRows.encoded_rows`` gives them); ``None`` declines (see the module)."""
    if _native is None:
        return None
    return _native(rows, plan.order, plan.keys, plan.kinds, depth, MAX_JSON_DEPTH)


class LaidOutBatch(FastRowBatch):
    """Rows already laid out at :data:`ROW_DEPTH`, with the ``convert`` that makes their
    columns (the general path's conversion of the same driver rows), called only when
    something reads the rows; the writer, given the bytes, never does."""

    __slots__ = ("_convert", "_laid")

    def __init__(
        self,
        names: Sequence[str],
        length: int,
        laid: bytes,
        convert: Callable[[], Sequence[Sequence[object]]],
        *,
        json_columns: Iterable[int],
    ) -> None:
        super().__init__(names, [() for _ in names], json_columns=json_columns)
        self._length = length
        self._laid = laid
        self._convert: Callable[[], Sequence[Sequence[object]]] | None = convert

    @property
    def columns(self) -> tuple[Sequence[object], ...]:
        """The converted columns, made on the first read (``convert`` is then let go)."""
        if self._convert is not None:
            self._columns = tuple(self._convert())
            self._convert = None
        return self._columns

    def encoded_rows(self, depth: int) -> bytes | memoryview | None:
        """The laid-out bytes at :data:`ROW_DEPTH`; elsewhere the columns through
        :func:`~fetcher.adapters.jsonlayout.fastjson.encode_rows`."""
        return self._laid if depth == ROW_DEPTH else encode_rows(self, depth)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> FastRowBatch: ...

    def __getitem__(self, index: int | slice) -> Row | FastRowBatch:
        _ = self.columns  # the base class reads the columns
        return super().__getitem__(index)

    def __iter__(self) -> Iterator[Row]:
        _ = self.columns
        return super().__iter__()

    def __repr__(self) -> str:
        return f"LaidOutBatch({self.names!r}, {len(self)} rows)"
