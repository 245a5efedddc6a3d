"""Batches whose rows arrive as one JSON object text each (issue 23: the source does the
per-value work; contract §5.3, §5.4).

A connector's fast path asks the source database to write every row as one compact JSON
object whose members already hold their §5.3 values (PostgreSQL: a concatenation of
server-side casts, ``postgres.row_text_sql``). What is left is layout: the C extension
(:func:`~fetcher.adapters.json_layout.layout_rows`) sorts the keys at every level, indents,
re-escapes strings canonically and copies numbers as received, without one Python object per
value. Whenever it declines (not built, a text it does not handle exactly, a value nested too
deep), the batch parses its texts as the general path parses a JSON column (exact numbers)
and the batch encodes like any :class:`~fetcher.adapters.fastjson.FastRowBatch`, so the bytes
and the rows read from it are the same either way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from fetcher.adapters.fastjson import LazyColumnsBatch, encode_rows, parse_json_column
from fetcher.adapters.json_layout import layout_rows, stamp_text
from fetcher.engine.kit import MAX_JSON_DEPTH, ROW_DEPTH, JsonDepthError, naming_column

__all__ = ["RowTextBatch"]

#: A row's values sit one level below the row object, so the row text may nest one more level
#: than a column's value (:data:`MAX_JSON_DEPTH`); deeper rows decline to the parse below,
#: which names the column.
_ROW_MAX_DEPTH = MAX_JSON_DEPTH + 1


class RowTextBatch(LazyColumnsBatch):
    """Rows of one table as the source's JSON object texts (``str`` or UTF-8 ``bytes``), one
    per row, with the columns' ``names`` (the object's keys) and the indices of its JSON
    columns.

    ``canonical_ints``: whether every integer in the texts is canonical (no ``-0``, no
    exponent: integer columns and ``jsonb``), which lets the fallback parse read them in C.
    ``timestamps`` and ``zoned_timestamps``: the columns whose values are PostgreSQL
    ``timestamp`` (``timestamptz``) texts, finished here (:func:`~fetcher.adapters.
    json_layout.stamp_text`) rather than by the server. The columns are parsed on the first
    read of the rows, which the writer, given the bytes, never needs."""

    __slots__ = ("_canonical_ints", "_stamps", "_texts")

    def __init__(
        self,
        names: Sequence[str],
        texts: Sequence[str | bytes],
        *,
        json_columns: Sequence[int],
        canonical_ints: bool,
        timestamps: Sequence[str] = (),
        zoned_timestamps: Sequence[str] = (),
    ) -> None:
        super().__init__(names, len(texts), json_columns=json_columns)
        self._texts = texts
        self._canonical_ints = canonical_ints
        self._stamps = (tuple(timestamps), tuple(zoned_timestamps))

    @property
    def texts(self) -> Sequence[str | bytes]:
        """The rows' texts as the source wrote them."""
        return self._texts

    def encoded_rows(self, depth: int) -> bytes | memoryview | None:
        """The C layout of the texts at the rows' depth; otherwise the parsed columns through
        :func:`~fetcher.adapters.fastjson.encode_rows` (``None``: the engine's writer)."""
        if depth == ROW_DEPTH and not self._parsed:
            plain, zoned = self._stamps
            laid = layout_rows(
                self._texts,
                depth,
                max_depth=_ROW_MAX_DEPTH,
                timestamps=plain,
                zoned_timestamps=zoned,
            )
            if laid is not None:
                return laid
        return encode_rows(self, depth)

    def __repr__(self) -> str:
        return f"RowTextBatch({self.names!r}, {len(self)} rows)"

    def _make_columns(self) -> list[list[object]]:
        """The columns, from the texts parsed as the general path parses a JSON column
        (invalid UTF-8 replaced, §5.3 Text row); a value nested too deep names its column."""
        texts = [
            text if isinstance(text, str) else text.decode("utf-8", "replace")
            for text in self._texts
        ]
        try:
            rows = parse_json_column(texts, canonical_ints=self._canonical_ints)
        except JsonDepthError:
            with naming_column(_deep_member(texts, self.names)):
                raise
        if any(type(row) is not dict or len(row) != len(self.names) for row in rows):
            raise ValueError("a row text is not an object of the selected columns")
        columns: list[list[object]] = [
            [row[name] for row in rows]  # type: ignore[index]
            for name in self.names
        ]
        for zoned, stamped in enumerate(self._stamps):
            for name in stamped:
                index = self.names.index(name)
                columns[index] = [_stamped(value, zoned=bool(zoned)) for value in columns[index]]
        return columns


def _stamped(value: object, *, zoned: bool) -> object:
    """A timestamp member's parsed value finished (NULL stays ``None``)."""
    return stamp_text(value, zoned=zoned) if isinstance(value, str) else value


def _deep_member(texts: Sequence[str], names: Sequence[str]) -> str | None:
    """The column whose value the standard parser cannot descend, found member by member
    (only on the way to a ``JsonDepthError``)."""
    decoder = json.JSONDecoder()
    for text in texts:
        for name in names:
            marker = json.dumps(name, ensure_ascii=False) + ":"
            start = text.find(marker)
            if start < 0:
                continue
            try:
                decoder.raw_decode(text, start + len(marker))
            except RecursionError:
                return name
            except ValueError:
                continue
    return None
