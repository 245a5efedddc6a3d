"""The §5.4 streaming writer of ``fetcher.engine.document``."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.engine.document import (
    ROW_DEPTH,
    DatasourceWriter,
    MemorySpool,
    _escape,
    _spec_escape,
    document_size,
    dumps_document,
    encode_row,
    write_document,
)
from fetcher.engine.ports import Row
from fetcher.engine.values import ExactNumber

Document = dict[str, dict[str, list[Row]]]

# --- strategies -----------------------------------------------------------------------------

_ALPHABET = st.characters(codec="utf-8")  # every code point but surrogates: astral, controls
_CONTROL = st.characters(max_codepoint=0x1F) | st.sampled_from('"\\\x7f\u2028\u2029\U0001f600')
_keys = st.text(_ALPHABET | _CONTROL, max_size=8)
_strings = st.text(_ALPHABET | _CONTROL, max_size=20)
_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1.0, -0.0, 0.0, 1e16, 1e-05, 123456789.0, 1.5e300, 5e-324]
)
_integers = st.integers(min_value=-(10**40), max_value=10**40) | st.sampled_from(
    [0, -1, 2**63, -(2**63) - 1, 10**200]
)
_exact = st.from_regex(
    r"-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,12})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
).map(ExactNumber)
_scalars = st.none() | st.booleans() | _integers | _floats | _strings
_json_values = st.recursive(
    _scalars | _exact,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=12,
)
_flat_rows = st.dictionaries(_keys, _scalars, max_size=6)
_rows = _flat_rows | st.dictionaries(_keys, _scalars | _json_values, max_size=6)
_tables = st.dictionaries(_keys, st.lists(_rows, max_size=5), max_size=4)
_documents = st.dictionaries(_keys, _tables, max_size=3)


# --- helpers --------------------------------------------------------------------------------


class _Sink:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def write(self, chunk: bytes) -> None:
        self.chunks.append(chunk)


async def _stream(doc: Document, buffer_bytes: int, batch: int) -> tuple[bytes, int, int, int]:
    """Write ``doc`` through the streaming API; return bytes, returned count, size, row count."""
    parts: list[tuple[str, MemorySpool]] = []
    rows_total = 0
    for ds in sorted(doc):
        spool = MemorySpool()
        writer = DatasourceWriter(spool, buffer_bytes=buffer_bytes)
        for table in sorted(doc[ds]):
            await writer.open_table(table)
            rows = doc[ds][table]
            for start in range(0, len(rows), batch):
                await writer.write_rows(rows[start : start + batch])
            await writer.close_table()
        assert writer.bytes_written > 0
        await writer.close()
        assert writer.bytes_written == spool.size
        rows_total += writer.row_count
        parts.append((ds, spool))
    size = document_size([(ds, spool.size) for ds, spool in parts])
    sink = _Sink()
    written = await write_document(parts, sink)
    return b"".join(sink.chunks), written, size, rows_total


def _plain(value: object) -> object:
    """The logical value with ExactNumber replaced by what ``json.loads`` reads back."""
    if isinstance(value, ExactNumber):
        return value.value
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _same(a: object, b: object) -> bool:
    """Equality that also tells ``1`` from ``1.0`` and ``True`` (§5.4 Floats)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_SHORT = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "\\": "\\"}


def _check_strings(text: str) -> None:
    """§5.4 Strings: only ``"``, ``\\`` and controls escaped, short forms, lower-case hex."""
    for literal in _STRING.findall(text):
        body = literal[1:-1]
        assert not any(ord(c) < 0x20 for c in body)
        for escape in _ESCAPE.findall(body):
            if escape.startswith("u"):
                assert escape == escape.lower()
                code = int(escape[1:], 16)
                assert code < 0x20
                assert chr(code) not in "\n\r\t\b\f"
            else:
                assert escape in _SHORT
    assert '"' not in _STRING.sub("", text)


def _check_layout(text: str, base: int = 0) -> None:
    """§5.4 Layout: 2-space indentation per level, one member or element per line. ``text``
    starts at nesting level ``base`` (its first line already indented)."""
    depth = base
    for line in text.split("\n"):
        body = line.lstrip(" ")
        if body[:1] in ("}", "]"):
            depth -= 1
        assert len(line) - len(body) == 2 * depth, line
        assert body == body.rstrip()
        if body.endswith(("{", "[")):
            depth += 1
    assert depth == base


def _check_sorted(text: str) -> None:
    def hook(pairs: list[tuple[str, object]]) -> dict[str, object]:
        keys = [k for k, _ in pairs]
        assert keys == sorted(set(keys))
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)


# --- properties -----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(_documents, st.sampled_from([1, 64, 65536]), st.integers(min_value=1, max_value=4))
def test_streaming_equals_reference_and_round_trips(
    doc: Document, buffer_bytes: int, batch: int
) -> None:
    data, written, size, rows = asyncio.run(_stream(doc, buffer_bytes, batch))
    assert data == dumps_document(doc)
    assert written == size == len(data)
    assert rows == sum(len(r) for tables in doc.values() for r in tables.values())
    assert _same(json.loads(data), _plain(doc))
    assert json.loads(data) == doc  # ExactNumber compares as its value
    text = data.decode("utf-8")
    assert not text.endswith("\n")
    _check_layout(text)
    _check_strings(text)
    _check_sorted(text)


@settings(max_examples=300, deadline=None)
@given(_rows, st.integers(min_value=0, max_value=5))
def test_encode_row_at_depth(row: dict[str, object], depth: int) -> None:
    text = encode_row(row, depth)
    assert _same(json.loads(text), _plain(row))
    assert text.startswith("{")
    lines = text.split("\n")
    assert lines[-1] == "  " * depth + "}" or text == "{}"
    _check_layout("  " * depth + text, depth)
    _check_strings(text)


@given(_flat_rows)
def test_flat_fast_path_matches_reference_encoder(row: dict[str, object]) -> None:
    expected = dumps_document({"d": {"t": [row]}}).decode("utf-8")
    framed = '{\n  "d": {\n    "t": [\n      ' + encode_row(row, ROW_DEPTH) + "\n    ]\n  }\n}"
    assert framed == expected


# --- examples -------------------------------------------------------------------------------


def test_framing_example() -> None:
    doc: Document = {"ds": {"u": [], "t": [{"a": 1}]}}
    expected = (
        '{\n  "ds": {\n    "t": [\n      {\n        "a": 1\n      }\n    ],\n    "u": []\n  }\n}'
    )
    assert dumps_document(doc) == expected.encode()
    data, _, size, _ = asyncio.run(_stream(doc, 65536, 10))
    assert data == expected.encode()
    assert size == len(expected)


def test_empty_document_and_datasource() -> None:
    assert dumps_document({}) == b"{}"
    assert dumps_document({"a": {}}) == b'{\n  "a": {}\n}'
    assert asyncio.run(_stream({}, 10, 1))[0] == b"{}"
    assert asyncio.run(_stream({"a": {}}, 10, 1))[0] == b'{\n  "a": {}\n}'
    assert document_size([]) == 2


def test_all_characters_escape_as_the_rule_says() -> None:
    everything = "".join(map(chr, range(0x110000)))
    assert _escape(everything) == _spec_escape(everything)
    assert _spec_escape("\x1f\x7f\u2028</>&'") == '"\\u001f\x7f\u2028</>&\'"'
    assert encode_row({"k": "\x00\n\x1f"}, 0) == '{\n  "k": "\\u0000\\n\\u001f"\n}'


def test_float_and_integer_forms() -> None:
    row: Row = {"a": 1.0, "b": 1e16, "c": 1e-05, "d": 10**30, "e": -0.0, "f": True, "g": None}
    assert encode_row(row, 0) == (
        '{\n  "a": 1.0,\n  "b": 1e+16,\n  "c": 1e-05,\n  "d": 1000000000000000000000000000000,'
        '\n  "e": -0.0,\n  "f": true,\n  "g": null\n}'
    )


def test_lenient_values_take_the_python_path() -> None:
    huge = 10**5000
    text = encode_row({"h": huge, "n": float("nan"), "i": float("-inf"), "s": "a\ud800"}, 0)
    assert text.split("\n")[1] == '  "h": 1' + "0" * 5000 + ","
    assert '"n": "NaN"' in text
    assert '"i": "-Infinity"' in text
    assert dumps_document({"d": {"t": [{"s": "a\ud800"}]}}).decode().count("\ufffd") == 1


def test_exact_numbers_inside_nested_values() -> None:
    row: Row = {"j": {"b": [ExactNumber("1.10"), ExactNumber("1E5")], "a": ExactNumber("-0")}}
    assert encode_row(row, 0) == (
        '{\n  "j": {\n    "a": -0,\n    "b": [\n      1.10,\n      1E5\n    ]\n  }\n}'
    )


async def test_writer_misuse_is_rejected() -> None:
    writer = DatasourceWriter(MemorySpool())
    with pytest.raises(RuntimeError, match="no table is open"):
        await writer.write_rows([{"a": 1}])
    await writer.open_table("b")
    with pytest.raises(RuntimeError, match="a table is open"):
        await writer.open_table("c")
    await writer.close_table()
    with pytest.raises(ValueError, match="increasing"):
        await writer.open_table("a")
    with pytest.raises(ValueError, match="increasing"):
        await writer.open_table("b")
    await writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        await writer.close()


async def test_write_document_checks_spool_sizes() -> None:
    class LyingSpool(MemorySpool):
        @property
        def size(self) -> int:
            return 1

    spool = LyingSpool()
    await spool.write(b"{}")
    with pytest.raises(ValueError, match="expected 1"):
        await write_document([("d", spool)], _Sink())


async def test_memory_spool() -> None:
    spool = MemorySpool()
    await spool.write(b"ab")
    await spool.write(b"c")
    assert spool.size == 3
    assert [c async for c in spool.read()] == [b"ab", b"c"]
    assert spool.getvalue() == b"abc"
    await spool.close()
    await spool.close()
    assert spool.getvalue() == b""
    with pytest.raises(RuntimeError):
        await spool.write(b"x")


def test_buffering_flushes_by_size() -> None:
    async def run() -> list[int]:
        sizes: list[int] = []

        class Recording(MemorySpool):
            async def write(self, data: bytes) -> None:
                sizes.append(len(data))
                await super().write(data)

        writer = DatasourceWriter(Recording(), buffer_bytes=100)
        await writer.open_table("t")
        for _ in range(10):
            await writer.write_rows([{"k": "x" * 40}])
        await writer.close_table()
        await writer.close()
        return sizes

    sizes = asyncio.run(run())
    assert len(sizes) > 3
    assert all(size >= 100 for size in sizes[:-1])
