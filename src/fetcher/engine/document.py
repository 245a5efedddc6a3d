"""The streaming writer of the result document (contract §5.4, spools §4.3.1).

Layout (§5.4): 2-space indentation, one member or element per line, ``": "`` after keys, keys
sorted by code point at every level, only ``"``, ``\\`` and characters below U+0020 escaped
(``\\n \\r \\t \\b \\f``, others ``\\u00xx`` in lower-case hex), integral floats keep ``.0`` or an
exponent, and no trailing newline. Datasources sit at depth 1, tables at depth 2, rows at depth 3::

    {
      "ds": {
        "t": [
          {
            "a": 1
          }
        ],
        "u": []
      }
    }

Each datasource's value (``{…}``) is written into its own :class:`~fetcher.engine.ports.Spool` by
a :class:`DatasourceWriter`; :func:`write_document` later frames the spools in key order into the
sink, and :func:`document_size` gives the exact total from the spool sizes (§4.3 step 4). Nothing
holds the whole document.

Speed: a container (row, nested object or array) whose items are all plain scalars goes through
CPython's C encoder (``_json``, stdlib) with ``",\\n" + indentation`` as item separator; raw
newlines only occur there, since strings escape them. Python 3.11's ``json.dumps(indent=...)``
is not C-accelerated, so it is not used. Everything else (nesting, :class:`ExactNumber
<fetcher.engine.values.ExactNumber>`, non-finite floats, huge integers) goes through a small
pure-Python encoder with the same output. :func:`dumps_document` is a reference that uses only
the Python encoder and an escaper written from §5.4; tests compare the two byte for byte.

A whole batch of flat rows is written at once: a :class:`RowBatch` (columns from a connector) or
``dict`` rows with the same keys fill one ``%`` template per row, with the members' key text
computed once (:func:`_batch_text`); other ``dict`` rows go through the C encoder as one list
(:func:`_dicts_text`). Anything these refuse is encoded row by row, as above.

A batch may also encode itself (:class:`SelfEncodingRows`): an adapter with a faster encoder
(``fetcher.adapters.jsonlayout.fastjson``, orjson) yields batches that write their own §5.4 bytes,
or decline and leave the batch to the paths above. The engine itself stays standard library only
(§1.4) and writes the same bytes without it.

Depth: a value nested deeper than :data:`~fetcher.engine.errors.MAX_JSON_DEPTH` levels inside a
row is refused with :class:`~fetcher.engine.errors.JsonDepthError`, naming its column, before
the recursion goes further (:func:`_encode_into` counts levels; orjson refuses such a value
itself, so its batch comes here). A batch within the bound is written on a fresh stack when the
caller's own stack was too deep for it (:func:`_rows_bytes`), so the outcome never depends on
where the writer was called from.
"""

from __future__ import annotations

import math
from _json import encode_basestring as _c_escape
from _json import make_encoder as _c_make_encoder
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from functools import lru_cache, partial
from itertools import chain
from operator import is_not, itemgetter
from typing import Final, Protocol, overload, runtime_checkable

from fetcher.engine.errors import MAX_JSON_DEPTH, JsonDepthError
from fetcher.engine.ports import ResultSink, Row, Spool
from fetcher.engine.values import (
    ExactNumber,
    encode_text,
    encode_value,
    exceeds_json_depth,
    too_deep_member,
    with_stack_retry,
)

__all__ = [
    "DatasourceWriter",
    "MemorySpool",
    "ROW_DEPTH",
    "RowBatch",
    "SelfEncodingRows",
    "document_head",
    "document_size",
    "dumps_document",
    "encode_row",
    "write_document",
    "write_part",
]

#: Nesting depth of a row object: document → datasource → table → array (§5.4).
ROW_DEPTH: Final = 3
#: The deepest level a container may open at: a row's values nest at most
#: :data:`~fetcher.engine.errors.MAX_JSON_DEPTH` levels below the row.
_DEEPEST_LEVEL: Final = ROW_DEPTH + MAX_JSON_DEPTH
_INDENT: Final = "  "
_NON_FINITE: Final[dict[str, str]] = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}
_FLAT_TYPES: Final = frozenset({str, int, float, bool, type(None)})
#: Integers with more digits than this are formatted through ``Decimal`` (CPython's str limit).
_SAFE_INT_DIGITS: Final = 4000
_SAFE_INT_BOUND: Final = 10**_SAFE_INT_DIGITS

#: §5.4 string escaping, written from the rule itself (used by :func:`dumps_document`).
_SPEC_ESCAPES: Final[dict[int, str]] = {
    **{c: f"\\u{c:04x}" for c in range(0x20)},
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    ord("\b"): "\\b",
    ord("\f"): "\\f",
    ord('"'): '\\"',
    ord("\\"): "\\\\",
}


def _spec_escape(s: str) -> str:
    """A JSON string literal per §5.4, straight from the rule."""
    return '"' + s.translate(_SPEC_ESCAPES) + '"'


#: CPython's C string escaper; its output equals :func:`_spec_escape` (tested).
_escape: Final[Callable[[str], str]] = _c_escape


def _to_utf8(text: str) -> bytes:
    """UTF-8 bytes; unpaired surrogates become U+FFFD (§5.3 text row), never an error."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return encode_text(text).encode("utf-8")


def _int_text(value: int) -> str:
    """Decimal integer text (§5.4 Integers), including integers beyond CPython's str limit."""
    if -_SAFE_INT_BOUND < value < _SAFE_INT_BOUND:
        return int.__repr__(value)
    return str(Decimal(value))


def _float_text(value: float) -> str:
    """Shortest round-trip text (§5.4 Floats); non-finite values as the §5.3 strings."""
    text = float.__repr__(value)
    return text if math.isfinite(value) else _NON_FINITE[text]


def _scalar_text(value: object, escape: Callable[[str], str]) -> str | None:
    """The JSON text of a scalar, or ``None`` when ``value`` is a container or unknown."""
    if value is None or value is True or value is False:
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, int):
        return _int_text(value)
    if isinstance(value, float):
        return _float_text(value)
    return value.text if isinstance(value, ExactNumber) else None


def _encode_into(value: object, level: int, out: list[str], escape: Callable[[str], str]) -> None:
    """Append the §5.4 text of ``value`` (its first line already positioned at ``level``).

    A container at a level past :data:`_DEEPEST_LEVEL` (nested deeper than ``MAX_JSON_DEPTH``
    below its row) raises :class:`JsonDepthError`."""
    text = _scalar_text(value, escape)
    if text is None and level > _DEEPEST_LEVEL and isinstance(value, Mapping | list | tuple):
        raise JsonDepthError
    if text is None and escape is _escape:
        text = _flat_text(value, level)
    if text is not None:
        out.append(text)
    elif isinstance(value, Mapping):
        _encode_mapping(value, level, out, escape)
    elif isinstance(value, list | tuple):
        _encode_sequence(value, level, out, escape)
    else:  # not JSON-ready: apply the default §5.3 encoding, which always yields JSON-ready
        _encode_into(encode_value(value), level, out, escape)


def _key_text(key: object) -> str:
    """A member key as text; non-``str`` keys are converted as the C encoder does."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return "null" if key is None else ("true" if key else "false")
    return str(key)


def _encode_mapping(
    value: Mapping[str, object], level: int, out: list[str], escape: Callable[[str], str]
) -> None:
    """An object: members sorted by code point (§5.4 Keys), one per line."""
    if not value:
        out.append("{}")
        return
    items = sorted((_key_text(k), v) for k, v in value.items())
    inner = "\n" + _INDENT * (level + 1)
    separator = "{" + inner
    for key, member in items:
        out.append(separator + escape(key) + ": ")
        _encode_into(member, level + 1, out, escape)
        separator = "," + inner
    out.append("\n" + _INDENT * level + "}")


def _encode_sequence(
    value: Sequence[object], level: int, out: list[str], escape: Callable[[str], str]
) -> None:
    """An array: one element per line (§5.4 Layout)."""
    if not value:
        out.append("[]")
        return
    inner = "\n" + _INDENT * (level + 1)
    separator = "[" + inner
    for element in value:
        out.append(separator)
        _encode_into(element, level + 1, out, escape)
        separator = "," + inner
    out.append("\n" + _INDENT * level + "]")


def _reject(value: object) -> object:
    """``default`` of the C encoder: any non-JSON type sends the value to the Python encoder."""
    raise TypeError(type(value).__name__)


def _flat_encoder(level: int) -> Callable[[object, int], list[str]]:
    """The C encoder for a flat container at ``level``: items separated by ``,\\n`` plus the
    indentation of ``level + 1``. A flat container has only scalar items, so the separator is
    the only place a raw newline goes."""
    encoder = _FLAT_ENCODERS.get(level)
    if encoder is None:
        separator = ",\n" + _INDENT * (level + 1)
        # (markers, default, escaper, indent, key_sep, item_sep, sort_keys, skipkeys, allow_nan)
        encoder = _c_make_encoder(None, _reject, _escape, None, ": ", separator, True, False, False)
        _FLAT_ENCODERS[level] = encoder
    return encoder


_FLAT_ENCODERS: Final[dict[int, Callable[[object, int], list[str]]]] = {}


def _c_flat_text(value: object, items: Iterable[object], level: int) -> str | None:
    """The C encoder's text of ``value`` at ``level`` (:func:`_flat_encoder`) when each of
    ``items`` (its scalars) is a plain scalar; ``None`` otherwise, or when the encoder refuses
    a value (non-finite float, huge integer, mixed keys)."""
    if not _FLAT_TYPES.issuperset(map(type, items)):
        return None
    try:
        return "".join(_flat_encoder(level)(value, 0))
    except (TypeError, ValueError):
        return None


def _flat_text(value: object, level: int) -> str | None:
    """The §5.4 text of a ``dict``/``list``/``tuple`` whose items are all plain scalars, through
    the C encoder; ``None`` for anything else, or a value the C encoder refuses (non-finite
    float, huge integer, mixed keys)."""
    items: Iterable[object]
    if type(value) is dict:
        items = value.values()
    elif type(value) is list or type(value) is tuple:
        items = value
    else:
        return None
    text = _c_flat_text(value, items, level)
    if text is None:
        return None
    if len(text) == 2:  # {} or []
        return text
    return text[0] + "\n" + _INDENT * (level + 1) + text[1:-1] + "\n" + _INDENT * level + text[-1]


def encode_row(row: Row, depth: int) -> str:
    """One row object (§5.4) whose opening brace sits at ``depth`` (rows: :data:`ROW_DEPTH`).

    The result has no leading indentation; its closing brace is indented to ``depth``. Keys are
    ``str`` (the ``Row`` type). Plain-scalar containers use the C encoder; the rest (nested
    values, :class:`~fetcher.engine.values.ExactNumber`, non-finite floats) the Python one.
    """
    text = _flat_text(row, depth)
    if text is not None:
        return text
    out: list[str] = []
    _encode_mapping(row, depth, out, _escape)
    return "".join(out)


class RowBatch(Sequence[Row]):
    """Rows of one table held column by column, with the column names.

    It is a ``Sequence`` of ``dict`` rows, made on demand (``batch[i]``, iteration), so any
    consumer of ``Connector.stream`` batches can use it; :class:`DatasourceWriter` encodes it
    straight from the columns (:func:`_batch_text`). ``columns[i]`` holds the values of
    ``names[i]``; all columns have the same length.

    ``json_columns`` are the indices of columns whose values are parsed JSON without a single
    ``float`` (``dict``/``list``/``str``/``int``/``bool``/``None``/:class:`ExactNumber`, as
    :func:`~fetcher.engine.values.parse_json_exact_fractions` returns): a self-encoding
    subclass (:class:`SelfEncodingRows`) may hand their nested values to an encoder whose float
    text differs from §5.4's. The engine's own paths do not depend on it.
    """

    __slots__ = ("_columns", "_json_columns", "_length", "_names")

    def __init__(
        self,
        names: Sequence[str],
        columns: Sequence[Sequence[object]],
        *,
        json_columns: Iterable[int] = (),
    ) -> None:
        if len(names) != len(columns):
            raise ValueError("one column per name is required")
        lengths = {len(column) for column in columns}
        if len(lengths) > 1:
            raise ValueError("columns must have the same length")
        self._names = tuple(names)
        self._columns = tuple(columns)
        self._json_columns = frozenset(json_columns)
        self._length = lengths.pop() if lengths else 0

    @property
    def names(self) -> tuple[str, ...]:
        """The column names."""
        return self._names

    @property
    def columns(self) -> tuple[Sequence[object], ...]:
        """The values of each column, in ``names`` order."""
        return self._columns

    @property
    def json_columns(self) -> frozenset[int]:
        """Indices of the float-free parsed-JSON columns (see the class)."""
        return self._json_columns

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> RowBatch: ...

    def __getitem__(self, index: int | slice) -> Row | RowBatch:
        if isinstance(index, slice):
            columns = [column[index] for column in self._columns]
            return RowBatch(self._names, columns, json_columns=self._json_columns)
        if not -self._length <= index < self._length:
            raise IndexError("row index out of range")
        return dict(zip(self._names, [column[index] for column in self._columns], strict=True))

    def __iter__(self) -> Iterator[Row]:
        names = self._names
        for values in zip(*self._columns, strict=True):
            yield dict(zip(names, values, strict=True))

    def __repr__(self) -> str:
        return f"RowBatch({self._names!r}, {self._length} rows)"


#: Pieces of the row layout at :data:`ROW_DEPTH` (§5.4): a member's line start, the separator
#: between rows, and a row's first and last characters.
_MEMBER_START: Final = "\n" + _INDENT * (ROW_DEPTH + 1)
_ROW_SEPARATOR: Final = ",\n" + _INDENT * ROW_DEPTH
_ROW_OPEN: Final = "{" + _MEMBER_START
_ROW_CLOSE: Final = "\n" + _INDENT * ROW_DEPTH + "}"
#: Between two rows of a list of flat rows encoded by the C encoder with the member separator.
_RAW_ROW_JOIN: Final = "}," + _MEMBER_START + "{"
_ROW_JOIN: Final = _ROW_CLOSE + _ROW_SEPARATOR + _ROW_OPEN
_ROW_SEPARATOR_BYTES: Final = _ROW_SEPARATOR.encode()
#: The bytes a writer copies out of a large view per spool write.
_VIEW_SLICE_BYTES: Final = 1024 * 1024
_DICT_TYPE: Final = frozenset({dict})
_NONE_TYPE: Final = type(None)
_INT_COLUMN: Final = frozenset({int, _NONE_TYPE})
_STR_COLUMN: Final = frozenset({str, _NONE_TYPE})
_is_not_none: Final = partial(is_not, None)
#: The C encoder of a flat list of scalars, one per line (``"\n"`` only occurs between items).
_LINES_ENCODER: Final = _c_make_encoder(
    None, _reject, _escape, None, ": ", "\n", True, False, False
)


@runtime_checkable
class SelfEncodingRows(Protocol):
    """A batch of rows (a ``Sequence`` of rows, as ``Connector.stream`` yields) that can write
    its own §5.4 bytes, with a faster encoder than the engine's (an adapter's: the engine is
    standard library only, §1.4).

    :meth:`encoded_rows` MUST return exactly what the engine's reference encoder writes for the
    same rows (``dumps_document`` bytes, tested byte for byte), or ``None`` to decline: then the
    engine encodes the batch itself. Declining is always correct, never an error.
    """

    def encoded_rows(self, depth: int) -> bytes | memoryview | None:
        """The UTF-8 §5.4 text of the rows as array elements at ``depth``: each row object with
        its opening brace at ``depth`` (no leading indentation, the closing brace indented to
        ``depth``), rows joined by ``",\n"`` plus the indentation of ``depth``; or ``None``.
        A view (of a larger buffer) spares a large text its copy."""
        ...


def _rows_bytes(rows: Sequence[Row]) -> bytes | memoryview:
    """The §5.4 UTF-8 bytes of ``rows`` at :data:`ROW_DEPTH`, separated as array elements.

    A :class:`SelfEncodingRows` batch writes itself when it accepts; the other paths are
    :func:`_rows_text`'s. All paths give the same bytes. A value nested deeper than
    ``MAX_JSON_DEPTH`` raises :class:`JsonDepthError` naming its column; a batch within the
    bound that met a stack too deep for it is written again on a fresh one.
    """
    if isinstance(rows, SelfEncodingRows):
        data = rows.encoded_rows(ROW_DEPTH)
        if data is not None:
            return data
    try:
        text = with_stack_retry(_rows_text, rows)
    except JsonDepthError as exc:
        raise exc.located(column=_too_deep_column(rows)) from None
    return _to_utf8(text)


def _too_deep_column(rows: Sequence[Row]) -> str | None:
    """The first column holding a value nested deeper than ``MAX_JSON_DEPTH`` (the error's
    name for it), found without recursion and without reading a batch's rows (which may be what
    refused): a :class:`RowBatch` column by column."""
    if isinstance(rows, RowBatch):
        for name, column in zip(rows.names, rows.columns, strict=True):
            if any(map(exceeds_json_depth, column)):
                return name
        return None
    return too_deep_member(rows)


def _rows_text(rows: Sequence[Row]) -> str:
    """The §5.4 text of ``rows`` at :data:`ROW_DEPTH`, separated as array elements.

    Whole batches of flat rows are encoded at once: by column (:func:`_batch_text`) for a
    :class:`RowBatch` or ``dict`` rows with the same keys, else through the C encoder
    (:func:`_dicts_text`); any other batch row by row (:func:`encode_row`). All paths give the
    same text.
    """
    if isinstance(rows, RowBatch):
        text = _batch_text(rows)
    else:
        batch = _columns_of(rows)
        text = None if batch is None else _batch_text(batch)
        if text is None:
            text = _dicts_text(rows)
    if text is None:
        text = _ROW_SEPARATOR.join([encode_row(row, ROW_DEPTH) for row in rows])
    return text


def _columns_of(rows: Sequence[Row]) -> RowBatch | None:
    """``dict`` rows that all have the same keys in the same order, as columns; ``None`` for
    anything else."""
    batch = rows if type(rows) is list else list(rows)
    if not batch or not _DICT_TYPE.issuperset(map(type, batch)):
        return None
    names = tuple(batch[0])
    if not names or not all(map(names.__eq__, map(tuple, batch))):
        return None
    return RowBatch(names, [list(map(itemgetter(name), batch)) for name in names])


def _dicts_text(rows: Sequence[Row]) -> str | None:
    """``dict`` rows whose values are all plain scalars, as one C encoder call over the list;
    ``None`` when a row is not such a ``dict`` (or is empty) or the C encoder refuses a value.

    The encoder separates members and rows alike with ``,`` + newline + member indentation;
    a raw newline never occurs inside a scalar, so ``}`` + that + ``{`` is exactly the joint
    between two rows, which is then rewritten to the row layout.
    """
    batch = rows if type(rows) is list else list(rows)
    if not (_DICT_TYPE.issuperset(map(type, batch)) and all(batch)):
        return None
    text = _c_flat_text(batch, chain.from_iterable(map(dict.values, batch)), ROW_DEPTH)
    if text is None:
        return None
    return _ROW_OPEN + text[2:-2].replace(_RAW_ROW_JOIN, _ROW_JOIN) + _ROW_CLOSE


@lru_cache(maxsize=256)
def _member_starts(names: tuple[str, ...]) -> tuple[tuple[int, str], ...] | None:
    """For each member in sorted key order: its column index and the text before its value
    (line start, key, ``": "``); ``None`` when the names are empty, not all ``str`` or not
    distinct (such rows take the ``dict`` path)."""
    if not names or not all(type(name) is str for name in names) or len(set(names)) < len(names):
        return None
    order = sorted(range(len(names)), key=names.__getitem__)
    return tuple((index, _MEMBER_START + _escape(names[index]) + ": ") for index in order)


def _plain_strings(column: Sequence[object], nullable: bool) -> bool:
    """Whether each string of a ``str``/``None`` column is its JSON text between quotes (no
    character to escape) and, when the column has ``None``, no string is ``"None"``."""
    strings: Iterable[object] = filter(_is_not_none, column) if nullable else column
    joined = "".join(strings)  # type: ignore[arg-type]
    if len(_escape(joined)) != len(joined) + 2:
        return False
    return not (nullable and "None" in column)


def _encoded_column(column: Sequence[object]) -> list[str] | None:
    """The JSON text of each value of a column of plain scalars (one C encoder call, one value
    per line); ``None`` when the C encoder refuses a value (non-finite float, huge integer)."""
    values = column if type(column) is list or type(column) is tuple else list(column)
    try:
        text = "".join(_LINES_ENCODER(values, 0))
    except (TypeError, ValueError):
        return None
    return text[1:-1].split("\n")


def _batch_text(batch: RowBatch) -> str | None:
    """A :class:`RowBatch` of plain scalars, without building ``dict`` rows.

    One ``%`` template per row (members in sorted key order) is filled for all rows at once.
    Per column: integers (and ``None``) go in as they are (``%s`` is their repr); strings that
    need no escaping go in between quotes; anything else as the JSON text from the C encoder.
    A ``None`` that went in as is, or between quotes, is then rewritten to ``null``: the text
    ``<line start><key>: None`` (or ``"None"``) can only be that member's value, since a raw
    newline never occurs inside a value and such a string column has no ``"None"``.
    ``None`` when a value is not a plain scalar or the C encoder refuses it.
    """
    starts = _member_starts(batch.names)
    if starts is None or not batch:
        return None
    pieces: list[str] = []
    arguments: list[Sequence[object]] = []
    nulls: list[tuple[str, str]] = []
    for index, start in starts:
        column = batch.columns[index]
        kinds = set(map(type, column))
        template_start = start.replace("%", "%%")
        if kinds <= _INT_COLUMN:
            pieces.append(template_start + "%s")
            if _NONE_TYPE in kinds:
                nulls.append((start + "None", start + "null"))
        elif kinds <= _STR_COLUMN and _plain_strings(column, _NONE_TYPE in kinds):
            pieces.append(template_start + '"%s"')
            if _NONE_TYPE in kinds:
                nulls.append((start + '"None"', start + "null"))
        elif kinds <= _FLAT_TYPES and (texts := _encoded_column(column)) is not None:
            pieces.append(template_start + "%s")
            column = texts
        else:
            return None
        arguments.append(column)
    template = "{" + ",".join(pieces) + _ROW_CLOSE
    try:
        text = _ROW_SEPARATOR.join([template] * len(batch)) % tuple(
            chain.from_iterable(zip(*arguments, strict=True))
        )
    except ValueError:  # an integer beyond CPython's str limit
        return None
    for old, new in nulls:
        text = text.replace(old, new)
    return text


def _key_bytes(key: str) -> bytes:
    """A member key as §5.4 JSON string bytes."""
    return _to_utf8(_escape(key))


class DatasourceWriter:
    """Streams ONE datasource's object value (``{…}``, the text after ``"<ds>": `` at depth 1)
    into a spool (§4.3.1), buffering up to ``buffer_bytes`` before each spool write.

    Call ``open_table`` in sorted key order, ``write_rows`` any number of times, ``close_table``,
    and finally ``close`` (closing brace and flush). The spool's contents then equal this
    datasource's part of the §5.4 bytes.
    """

    def __init__(self, spool: Spool, *, buffer_bytes: int = 65536) -> None:
        self._spool = spool
        self._buffer_bytes = buffer_bytes
        self._chunks: list[bytes | memoryview] = []
        self._buffered = 0
        self._flushed = 0
        self._rows = 0
        self._tables = 0
        self._table_rows = 0
        self._open_key: str | None = None
        self._last_key: str | None = None
        self._closed = False
        self._append("{")

    @property
    def row_count(self) -> int:
        """Rows written so far over all tables (§5.4 ``row_count``)."""
        return self._rows

    @property
    def bytes_written(self) -> int:
        """Bytes produced so far, including those still buffered."""
        return self._flushed + self._buffered

    async def open_table(self, key: str) -> None:
        """Start the array of table ``key``; keys must come in strictly increasing order."""
        self._check_open(table_open=False)
        if self._last_key is not None and not self._last_key < key:
            raise ValueError("tables must be opened in strictly increasing key order")
        prefix = ",\n" if self._tables else "\n"
        self._append_bytes(_to_utf8(prefix + _INDENT * 2) + _key_bytes(key) + b": [")
        self._open_key = self._last_key = key
        self._tables += 1
        self._table_rows = 0
        await self._maybe_flush()

    async def write_rows(self, rows: Sequence[Row]) -> None:
        """Append rows (already §5.3-encoded) to the open table."""
        self._check_open(table_open=True)
        if not rows:
            return
        prefix = _ROW_SEPARATOR_BYTES if self._table_rows else _ROW_SEPARATOR_BYTES[1:]
        self._append_bytes(prefix)
        data = _rows_bytes(rows)
        self._table_rows += len(rows)
        self._rows += len(rows)
        if len(data) < self._buffer_bytes:
            self._append_bytes(data)
            await self._maybe_flush()
            return
        # At least a buffer's worth (wide rows, one huge value): written by itself after what
        # is buffered, since joining it to the buffer would copy it whole; a view is copied out
        # a slice at a time (the spool takes bytes).
        await self._flush()
        if isinstance(data, bytes):
            await self._spool.write(data)
        else:
            for start in range(0, len(data), _VIEW_SLICE_BYTES):
                await self._spool.write(bytes(data[start : start + _VIEW_SLICE_BYTES]))
        self._flushed += len(data)

    async def close_table(self) -> None:
        """End the open table's array (``[]`` when it had no rows)."""
        self._check_open(table_open=True)
        self._append("\n" + _INDENT * 2 + "]" if self._table_rows else "]")
        self._open_key = None
        await self._maybe_flush()

    async def close(self) -> None:
        """Write the closing brace and flush everything into the spool."""
        self._check_open(table_open=False)
        self._append("\n" + _INDENT + "}" if self._tables else "}")
        self._closed = True
        await self._flush()

    def _check_open(self, *, table_open: bool) -> None:
        if self._closed:
            raise RuntimeError("datasource writer is closed")
        if (self._open_key is not None) != table_open:
            raise RuntimeError("a table is open" if not table_open else "no table is open")

    def _append(self, text: str) -> None:
        self._append_bytes(_to_utf8(text))

    def _append_bytes(self, data: bytes | memoryview) -> None:
        self._chunks.append(data)
        self._buffered += len(data)

    async def _maybe_flush(self) -> None:
        if self._buffered >= self._buffer_bytes:
            await self._flush()

    async def _flush(self) -> None:
        if not self._chunks:
            return
        data = b"".join(self._chunks)
        self._chunks.clear()
        self._buffered = 0
        await self._spool.write(data)
        self._flushed += len(data)


def _frame_prefix(index: int, key: str) -> bytes:
    """The framing before datasource ``index``'s value: separator, indentation, key, ``": "``."""
    return (b",\n  " if index else b"\n  ") + _key_bytes(key) + b": "


def _frame_suffix(count: int) -> bytes:
    """The framing after the last datasource (``{}`` when there are none)."""
    return b"\n}" if count else b"}"


def document_size(parts: Sequence[tuple[str, int]]) -> int:
    """Exact total bytes of the §5.4 document from (datasource key, part size) in key order,
    framing included (§4.3 step 4, §4.3.1 Size)."""
    framing = 1 + len(_frame_suffix(len(parts)))
    return framing + sum(len(_frame_prefix(i, key)) + size for i, (key, size) in enumerate(parts))


def document_head(key: str) -> bytes:
    """The bytes before the first datasource's value: ``{`` and its framing (§4.3.1 Direct
    streaming writes them, then that datasource's value, straight into the sink)."""
    return b"{" + _frame_prefix(0, key)


async def write_part(sink: ResultSink, index: int, key: str, spool: Spool) -> int:
    """Write part ``index`` of the document into ``sink``: its framing (separator, indentation,
    ``key``) and its spool's bytes, after parts ``0..index-1``. Returns the bytes written.

    Raises ``ValueError`` if the spool yields a different byte count than its ``size``, since
    the size limit and ``size_bytes`` were computed from it.
    """
    prefix = _frame_prefix(index, key)
    await sink.write(prefix)
    expected, produced = spool.size, 0
    async for chunk in spool.read():
        if chunk:
            await sink.write(chunk)
            produced += len(chunk)
    if produced != expected:
        raise ValueError(f"spool of {key!r} yielded {produced} bytes, expected {expected}")
    return len(prefix) + produced


async def write_document(
    parts: Sequence[tuple[str, Spool]], sink: ResultSink, *, start: int = 0
) -> int:
    """Write the framing and each spool's bytes, in the given (key) order, into ``sink``
    (§4.3 step 5). Returns the number of bytes written.

    With ``start=k`` (k ≥ 1) the sink already holds :func:`document_head` of part 0, part 0's
    value and parts ``1..k-1`` as :func:`write_part` writes them (direct streaming and the
    runner's early appends, §4.3.1): only the parts from ``k`` on and the closing framing are
    written. Raises ``ValueError`` as :func:`write_part` does.
    """
    written = 0
    if not start:
        await sink.write(b"{")
        written = 1
    for index in range(start, len(parts)):
        key, spool = parts[index]
        written += await write_part(sink, index, key, spool)
    suffix = _frame_suffix(len(parts))
    await sink.write(suffix)
    return written + len(suffix)


def dumps_document(doc: Mapping[str, Mapping[str, Sequence[Row]]]) -> bytes:
    """The whole §5.4 document in one call (keys sorted here): a reference for tests and small
    callers. It uses the pure-Python encoder and the escaping written from §5.4 itself."""
    out: list[str] = []
    logical = {
        ds: {table: list(rows) for table, rows in tables.items()} for ds, tables in doc.items()
    }
    _encode_mapping(logical, 0, out, _spec_escape)
    return _to_utf8("".join(out))


class MemorySpool:
    """An in-memory :class:`~fetcher.engine.ports.Spool` (tests, small results)."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._closed = False

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return self._size

    async def write(self, data: bytes) -> None:
        """Append ``data``."""
        if self._closed:
            raise RuntimeError("spool is closed")
        self._chunks.append(bytes(data))
        self._size += len(data)

    async def read(self) -> AsyncIterator[bytes]:
        """Yield everything written, in order."""
        for chunk in list(self._chunks):
            yield chunk

    def getvalue(self) -> bytes:
        """Everything written, as one ``bytes``."""
        return b"".join(self._chunks)

    async def close(self) -> None:
        """Discard the held data (safe to call twice)."""
        self._chunks.clear()
        self._closed = True
