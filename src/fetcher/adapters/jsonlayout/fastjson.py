"""orjson behind the engine's §5.4 writer (speed, issue 12; contract §5.3, §5.4).

The engine is standard library only (§1.4), so the fast encoder lives here, in the adapters
ring: connectors yield :class:`FastRowBatch` (an engine ``RowBatch`` that is also a
:class:`~fetcher.engine.document.SelfEncodingRows`), and the engine's writer asks each batch for
its own bytes before it encodes the batch itself. Nothing is registered anywhere: the batch
carries its encoder, so a host without orjson simply never sees one.

orjson is used only where it writes exactly the §5.4 bytes (checked byte for byte against the
engine's reference encoder, ``tests/unit/document/test_fastjson.py``):

* layout: ``OPT_INDENT_2 | OPT_SORT_KEYS``; keys sort by UTF-8 bytes, which is code-point order.
  the rows, wrapped in ``depth - 1`` one-element lists, come out indented at ``depth``, and
  only brackets and layout surround them, so slicing from the first row's ``{`` to the last
  row's ``}`` gives the rows at any depth (no second pass over the bytes);
* strings: escaped as §5.4 says (only ``"``, ``\\`` and controls, ``\\u00xx`` lower-case);
  a lone surrogate makes orjson refuse;
* integers: plain decimals; beyond 64 bits orjson refuses;
* floats: orjson writes ``1e-05`` as ``0.00001``, so they become fragments of ``float.__repr__``
  (non-finite: the §5.3 strings); :class:`~fetcher.engine.values.ExactNumber` a fragment of its
  text; subclasses and other types are refused;
* nested values only in ``json_columns`` (float-free parsed JSON), whose fractions may be
  ``orjson.Fragment`` of their source text (:func:`parse_json_column`): reading the batch
  (``batch[i]``, iteration) gives :class:`~fetcher.engine.values.ExactNumber` in their place,
  so any other consumer sees the engine's values.

Whenever orjson refuses, the batch declines (``None``) and the engine's own paths write it.

Depth: orjson writes at most 254 nested containers; the rows sit inside 4 of them here (as in
the document), so it writes exactly the values within the engine's ``MAX_JSON_DEPTH`` (250)
and declines a deeper one, which the engine's writer then refuses with ``JsonDepthError``
(``tests/unit/document/test_json_depth.py`` holds orjson to that). Reading such a batch's rows
(:func:`_logical`) refuses it too, before its recursion could exhaust the stack.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from typing import Final, overload

import orjson

from fetcher.engine.kit import (
    MAX_JSON_DEPTH,
    ROW_DEPTH,
    ExactNumber,
    JsonDepthError,
    Row,
    RowBatch,
    encode_float,
    naming_column,
)
from fetcher.engine.kit import parse_json_column as _parse_json_column

__all__ = [
    "FastRowBatch",
    "PreEncodedBatch",
    "encode_batch_columns",
    "parse_json_column",
    "parse_json_columns",
]

_NONE_TYPE: Final = type(None)
#: orjson output from this size on is handed out as a view (see :func:`encode_rows`).
_VIEW_FROM_BYTES: Final = 1024 * 1024
#: orjson's layout (§5.4 Layout, keys sorted by code point), with every type it would write
#: differently from §5.4 handed to :func:`_default` (dataclasses, datetimes, subclasses).
_OPTIONS: Final = (
    orjson.OPT_INDENT_2
    | orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
#: Scalar types orjson writes exactly as §5.4 does (``ExactNumber`` through :func:`_default`).
_SCALARS: Final = frozenset({str, int, bool, _NONE_TYPE, ExactNumber})
_NESTED: Final = _SCALARS | {dict, list, orjson.Fragment}


def parse_json_column(texts: Sequence[str | None], *, canonical_ints: bool) -> list[object]:
    """The engine's ``parse_json_column`` with fractions as ``orjson.Fragment`` of their source
    text (a C call instead of a Python hook per number). Only for a :class:`FastRowBatch` JSON
    column (``json_columns``): it writes them as is and reads them back as ``ExactNumber``."""
    return _parse_json_column(texts, canonical_ints=canonical_ints, parse_float=orjson.Fragment)


def _logical(value: object, depth: int = 0) -> object:
    """A JSON column value with each ``orjson.Fragment`` (a fraction's source text) as the
    :class:`~fetcher.engine.values.ExactNumber` it stands for. ``depth``: the levels ``value``
    sits below the column; nesting past ``MAX_JSON_DEPTH`` raises ``JsonDepthError``."""
    if type(value) is orjson.Fragment:
        return ExactNumber(orjson.dumps(value).decode())
    if type(value) is dict:
        if depth >= MAX_JSON_DEPTH:
            raise JsonDepthError
        return {key: _logical(member, depth + 1) for key, member in value.items()}
    if type(value) is list:
        if depth >= MAX_JSON_DEPTH:
            raise JsonDepthError
        return [_logical(item, depth + 1) for item in value]
    return value


def _default(value: object) -> orjson.Fragment:
    """``ExactNumber`` as its source text (§5.3 JSON row); anything else is refused, which makes
    the batch decline."""
    if type(value) is ExactNumber:
        return orjson.Fragment(value.text)
    raise TypeError(type(value).__name__)


def _float_value(value: float) -> object:
    """A float as §5.4 writes it: a fragment of its shortest round-trip text, or the §5.3
    string of a non-finite value."""
    if math.isfinite(value):
        return orjson.Fragment(float.__repr__(value))
    return encode_float(value)


def _ready_column(column: Sequence[object], nested: bool) -> Sequence[object] | None:
    """A column ready for orjson (floats replaced, see :func:`_float_value`); nested values
    only in a float-free JSON column; ``None`` for anything else."""
    kinds = set(map(type, column))
    if kinds <= (_NESTED if nested else _SCALARS):
        return column
    if float in kinds and kinds <= _SCALARS | {float}:
        return [_float_value(v) if type(v) is float else v for v in column]
    return None


def _plain_names(names: Sequence[str]) -> bool:
    """Non-empty, all ``str`` and distinct: other names take the engine's ``dict`` paths."""
    return bool(names) and all(type(n) is str for n in names) and len(set(names)) == len(names)


def encode_rows(batch: RowBatch, depth: int) -> bytes | memoryview | None:
    """The §5.4 bytes of ``batch``'s rows as array elements at ``depth`` through orjson, or
    ``None`` when a value is outside what orjson writes exactly. Beyond
    :data:`_VIEW_FROM_BYTES`, a view of orjson's output, which cutting out would copy whole."""
    if depth < 1 or not batch or not _plain_names(batch.names):
        return None
    columns = []
    for index, column in enumerate(batch.columns):
        ready = _ready_column(column, index in batch.json_columns)
        if ready is None:
            return None
        columns.append(ready)
    # dict rows built by C iteration only (no bytecode per row)
    rows: object = list(map(dict, map(zip, repeat(batch.names), zip(*columns, strict=True))))
    # Rows wrapped in depth - 1 lists sit at ``depth``: orjson indents them there itself, with
    # no second pass over the bytes to indent every line.
    for _ in range(depth - 1):
        rows = [rows]
    try:
        data = orjson.dumps(rows, default=_default, option=_OPTIONS)
    except orjson.JSONEncodeError:  # a surrogate, an integer beyond 64 bits, a refused type
        return None
    # "[\n  [\n    {...},\n    {...}\n  ]\n]": only brackets and layout surround the rows, whose
    # first and last bytes are their own braces (a row always has members, see _plain_names)
    start, end = data.index(b"{"), data.rindex(b"}") + 1
    return data[start:end] if len(data) < _VIEW_FROM_BYTES else memoryview(data)[start:end]


class FastRowBatch(RowBatch):
    """A :class:`~fetcher.engine.document.RowBatch` that writes its own §5.4 bytes through
    orjson (:meth:`encoded_rows`, the engine's ``SelfEncodingRows``), and whose JSON columns
    may hold ``orjson.Fragment`` fractions (read back as ``ExactNumber``)."""

    __slots__ = ()

    def encoded_rows(self, depth: int) -> bytes | memoryview | None:
        """See :func:`encode_rows`; ``None`` leaves the batch to the engine's encoder."""
        return encode_rows(self, depth)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> FastRowBatch: ...

    def __getitem__(self, index: int | slice) -> Row | FastRowBatch:
        if isinstance(index, slice):
            columns = [column[index] for column in self.columns]
            return FastRowBatch(self.names, columns, json_columns=self.json_columns)
        row = super().__getitem__(index)
        if not self.json_columns:
            return row
        return {name: _logical(value) for name, value in row.items()}

    def __iter__(self) -> Iterator[Row]:
        if not self.json_columns:
            yield from super().__iter__()
            return
        names, json_columns = self.names, self.json_columns
        columns = [
            list(map(_logical, column)) if index in json_columns else column
            for index, column in enumerate(self.columns)
        ]
        for values in zip(*columns, strict=True):
            yield dict(zip(names, values, strict=True))

    def __repr__(self) -> str:
        return f"FastRowBatch({self.names!r}, {len(self)} rows)"


def parse_json_columns(
    columns: Sequence[Sequence[object]],
    json_texts: Mapping[int, bool],
    names: Sequence[str] = (),
) -> list[Sequence[object]]:
    """``columns`` with each column of ``json_texts`` (index → ``canonical_ints``) parsed from
    its JSON text by :func:`parse_json_column`; a value nested too deep raises
    ``JsonDepthError`` naming its column (when ``names`` are given)."""
    parsed = list(columns)
    for index, canonical_ints in json_texts.items():
        texts: Sequence[str | None] = parsed[index]  # type: ignore[assignment]
        with naming_column(names[index] if names else None):
            parsed[index] = parse_json_column(texts, canonical_ints=canonical_ints)
    return parsed


def encode_batch_columns(
    names: Sequence[str],
    columns: Sequence[Sequence[object]],
    json_columns: Sequence[int],
    json_texts: Mapping[int, bool],
) -> bytes | None:
    """The §5.4 bytes at the rows' depth of the :class:`FastRowBatch` these columns make once
    the ``json_texts`` columns are parsed; ``None`` when orjson declines. This is the whole job
    of the encoder process (:mod:`fetcher.adapters.jsonlayout.encoder_process`): plain values in,
    bytes out, so that parsing and encoding run on a second core. A value nested deeper than
    ``MAX_JSON_DEPTH`` declines the batch too: the host parses it again and reports it."""
    try:
        parsed = parse_json_columns(columns, json_texts)
    except JsonDepthError:
        return None
    encoded = encode_rows(FastRowBatch(names, parsed, json_columns=json_columns), ROW_DEPTH)
    return bytes(encoded) if isinstance(encoded, memoryview) else encoded  # crosses a pipe


class PreEncodedBatch(FastRowBatch):
    """A :class:`FastRowBatch` whose bytes at the rows' depth were written from exactly its
    columns by :func:`encode_batch_columns` in the encoder process. The columns of
    ``json_texts`` still hold their JSON text; they are parsed on the first read of the rows
    (which the writer, given the bytes, never needs)."""

    __slots__ = ("_encoded", "_json_texts")

    def __init__(
        self,
        names: Sequence[str],
        columns: Sequence[Sequence[object]],
        *,
        json_columns: Sequence[int],
        json_texts: Mapping[int, bool],
        encoded: bytes,
    ) -> None:
        super().__init__(names, columns, json_columns=json_columns)
        self._json_texts = dict(json_texts)
        self._encoded = encoded

    @property
    def columns(self) -> tuple[Sequence[object], ...]:
        if self._json_texts:
            parsed = parse_json_columns(self._columns, self._json_texts, self.names)
            self._columns = tuple(parsed)
            self._json_texts = {}
        return self._columns

    def encoded_rows(self, depth: int) -> bytes | memoryview | None:
        return self._encoded if depth == ROW_DEPTH else encode_rows(self, depth)

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> FastRowBatch: ...

    def __getitem__(self, index: int | slice) -> Row | FastRowBatch:
        self.columns  # noqa: B018 - parses the JSON texts before the rows are read
        return super().__getitem__(index)

    def __iter__(self) -> Iterator[Row]:
        self.columns  # noqa: B018 - as in __getitem__
        return super().__iter__()
