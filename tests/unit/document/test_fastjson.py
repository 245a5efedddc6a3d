"""The orjson fast path (``fetcher.adapters.jsonlayout.fastjson``, issue 12): a ``FastRowBatch``
that encodes itself through orjson must give exactly the bytes of the engine's reference encoder
``dumps_document``, parsed JSON columns (``json_columns``) included, and every value orjson would
write differently must make the batch decline, so that the engine's own paths write it.

The engine is standard library only (§1.4): its writer takes a batch's own bytes through the
``SelfEncodingRows`` protocol and never imports orjson."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.adapters.jsonlayout.fastjson import FastRowBatch, encode_rows, parse_json_column
from fetcher.engine.document import (
    _ROW_SEPARATOR,
    ROW_DEPTH,
    RowBatch,
    SelfEncodingRows,
    encode_row,
)
from fetcher.engine.ports import Row
from fetcher.engine.values import ExactNumber, parse_json_exact_fractions
from fetcher.engine.values import parse_json_column as engine_parse_json_column
from tests.unit.document.test_batches import _batches, _names, _reference, _text, _written


def _fast_rows(batch: RowBatch) -> bytes | None:
    """The batch's own bytes at the row depth (``None``: it declines)."""
    encoded = encode_rows(batch, ROW_DEPTH)
    return None if encoded is None else bytes(encoded)


def _fast(batch: RowBatch) -> FastRowBatch:
    return FastRowBatch(batch.names, batch.columns, json_columns=batch.json_columns)


# JSON documents whose numbers are written in every form a source may use; parsed with
# parse_json_exact_fractions as the PostgreSQL connector does.
_IN_64_BITS = ["0", "-0", "1", "-12", "1.50", "1e5", "1E+05", "2.5e-7", "0.00001", "1e16",
               "12345678901234567890", "3.14159265358979323846264338327950288"]  # fmt: skip
_NUMBER_TEXTS = st.sampled_from([*_IN_64_BITS, "-9223372036854775809", "18446744073709551616"])
#: Text and keys without a lone surrogate: batches orjson always accepts.
_clean_text = st.lists(
    st.characters(codec="utf-8") | st.sampled_from(['"', "\\", "\n", "\x00", "\x1f", "%", "é"]),
    max_size=8,
).map("".join)


def _json_texts(
    text: st.SearchStrategy[str], numbers: st.SearchStrategy[str], names: st.SearchStrategy[str]
) -> st.SearchStrategy[str]:
    return st.recursive(
        st.none().map(lambda _: "null")
        | st.booleans().map(lambda b: "true" if b else "false")
        | numbers
        | text.map(lambda s: json.dumps(s, ensure_ascii=False)),
        lambda inner: (
            st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
            | st.dictionaries(names, inner, max_size=4).map(
                lambda d: "{" + ",".join(f"{json.dumps(k)}: {v}" for k, v in d.items()) + "}"
            )
        ),
        max_leaves=12,
    )


_json_text = _json_texts(_text, _NUMBER_TEXTS, _names)
_clean_json_text = _json_texts(_clean_text, st.sampled_from(_IN_64_BITS), _clean_text)


@st.composite
def _json_batches(draw: st.DrawFn, *, clean: bool = False) -> FastRowBatch:
    """A batch with a text column, an integer column and one or two parsed-JSON columns;
    ``clean``: nothing orjson refuses (no lone surrogate, no integer beyond 64 bits)."""
    text, json_text, names_of = (
        (_clean_text, _clean_json_text, _clean_text) if clean else (_text, _json_text, _names)
    )
    length = draw(st.integers(min_value=1, max_value=5))
    count = draw(st.integers(min_value=1, max_value=2))
    names = draw(st.lists(names_of, min_size=count + 2, max_size=count + 2, unique=True))
    columns: list[list[object]] = [
        draw(st.lists(st.none() | text, min_size=length, max_size=length)),
        draw(
            st.lists(st.none() | st.integers(-(2**63), 2**64 - 1), min_size=length, max_size=length)
        ),
    ]
    for _ in range(count):
        texts = draw(st.lists(st.none() | json_text, min_size=length, max_size=length))
        if draw(st.booleans()):  # as the PostgreSQL connector: fractions as orjson fragments
            columns.append(parse_json_column(texts, canonical_ints=False))
        else:
            columns.append([None if t is None else parse_json_exact_fractions(t) for t in texts])
    return FastRowBatch(names, columns, json_columns=range(2, 2 + count))


@settings(max_examples=400, deadline=None)
@given(st.lists(_json_batches(), min_size=1, max_size=3))
def test_json_column_batches_match_reference_encoder(batches: list[FastRowBatch]) -> None:
    assert _written(batches) == _reference(batches)


@settings(max_examples=400, deadline=None)
@given(st.lists(_batches().map(_fast), min_size=1, max_size=3))
def test_scalar_batches_match_reference_encoder(batches: list[FastRowBatch]) -> None:
    """Every kind of column the engine's own batch tests generate (hostile keys and strings,
    every number form, NaN, huge integers, nested values in unmarked columns)."""
    assert _written(batches) == _reference(batches)


@settings(max_examples=200, deadline=None)
@given(_json_batches(clean=True), st.integers(min_value=1, max_value=5))
def test_any_row_depth_matches_the_engine(batch: FastRowBatch, depth: int) -> None:
    """``encoded_rows(depth)``: each row as the engine's ``encode_row`` at that depth."""
    data = batch.encoded_rows(depth)
    assert data is not None
    indent = _ROW_SEPARATOR.replace("  " * ROW_DEPTH, "  " * depth)
    expected = indent.join(encode_row(row, depth) for row in batch)
    assert data == expected.encode()


def test_fast_batches_are_engine_batches_that_encode_themselves() -> None:
    batch = FastRowBatch(["a"], [[1, 2]])
    assert isinstance(batch, RowBatch)
    assert isinstance(batch, SelfEncodingRows)
    assert not isinstance(RowBatch(["a"], [[1]]), SelfEncodingRows)
    assert type(batch[1:]) is FastRowBatch
    assert list(batch[1:]) == [{"a": 2}]
    assert batch.encoded_rows(0) is None  # rows never sit at the document's own depth


class _Declared(list[Row]):
    """Rows that offer their own bytes: the writer must use them as they are."""

    def __init__(self, rows: list[Row], data: bytes | None) -> None:
        super().__init__(rows)
        self.data = data
        self.depths: list[int] = []

    def encoded_rows(self, depth: int) -> bytes | None:
        self.depths.append(depth)
        return self.data


def test_the_writer_takes_a_batch_s_own_bytes_or_encodes_it_itself() -> None:
    offered = _Declared([{"a": 1}], b"{OWN BYTES}")
    assert _written([offered]) == b'{\n  "d": {\n    "t": [\n      {OWN BYTES}\n    ]\n  }\n}'
    assert offered.depths == [ROW_DEPTH]
    declined = _Declared([{"a": 1}], None)
    assert _written([declined]) == _reference([declined])
    assert declined.depths == [ROW_DEPTH]


def test_parsed_json_holds_no_float() -> None:
    value = parse_json_exact_fractions('{"a": [1.5, 1e5, 0.1, -0], "b": 2}')
    assert value == {"a": [1.5, 100000.0, 0.1, 0], "b": 2}
    assert isinstance(value, dict)
    assert [type(v) for v in value["a"]] == [ExactNumber] * 4
    assert [v.text for v in value["a"]] == ["1.5", "1e5", "0.1", "-0"]


def _ledger_batch() -> FastRowBatch:
    """Rows as the PostgreSQL connector yields the issue's ledger table."""
    metadata = parse_json_exact_fractions(
        '{"tags": ["t1", "x"], "ref": "R-1", "score": 12.50, "attempt": 3, "channel": "web"}'
    )
    return FastRowBatch(
        ["id", "email", "amount", "created_at", "status", "metadata"],
        [
            ["6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88", "0e5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88"],
            ["a@example.com", 'quote"and\\slash\n'],
            ["1500.00", "-0.01"],
            ["2026-01-02T03:04:05.12Z", "2026-01-02T03:04:05Z"],
            ["settled", "pending"],
            [metadata, None],
        ],
        json_columns=[5],
    )


def test_the_ledger_takes_the_orjson_path_byte_for_byte() -> None:
    batch = _ledger_batch()
    assert _fast_rows(batch) is not None
    assert _written([batch, batch[1:]]) == _reference([batch, batch[1:]])
    assert b'"score": 12.50' in _written([batch])


@pytest.mark.parametrize(
    ("column", "json_column", "taken"),
    [
        ([1e16, 1e-05, -0.0, None], False, True),  # floats as fragments of their repr
        ([float("nan"), float("-inf")], False, True),  # as the §5.3 strings
        ([ExactNumber("1.10"), None], False, True),
        ([2**64, 1], False, False),  # beyond 64 bits: orjson refuses
        (["a\ud800"], False, False),  # a surrogate: orjson refuses
        ([{"k": 1}], False, False),  # nested, not a marked JSON column
        ([{"k": 1}], True, True),
        ([{"k": ExactNumber("1e5")}, [None, "x", 7]], True, True),
    ],
)
def test_orjson_path_taken_or_refused(column: list[object], json_column: bool, taken: bool) -> None:
    batch = FastRowBatch(
        ["v", "w"], [column, ["x"] * len(column)], json_columns=[0] if json_column else []
    )
    assert (_fast_rows(batch) is not None) is taken
    assert _written([batch]) == _reference([batch])


def test_subclasses_and_other_types_are_refused() -> None:
    class Text(str):
        pass

    for value in (Text("a"), b"bytes", (1, 2)):
        batch = FastRowBatch(["v"], [[value]])
        assert _fast_rows(batch) is None
        assert _written([batch]) == _reference([batch])


def _shape(value: object) -> object:
    """A value with every ExactNumber as its text, so equal shapes mean equal §5.4 bytes."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, ExactNumber):
        return ("exact", value.text)
    return (type(value).__name__, value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | _json_text, max_size=6), st.booleans())
def test_a_column_parses_as_its_values_one_by_one(texts: list[str | None], canonical: bool) -> None:
    if canonical:  # jsonb prints numeric text: never -0 (the caller's promise)
        texts = [t for t in texts if t is None or "-0" not in t]
    expected = [None if t is None else parse_json_exact_fractions(t) for t in texts]
    for parse in (engine_parse_json_column, parse_json_column):
        assert _shape(_logical_of(parse(texts, canonical_ints=canonical))) == _shape(expected)


def test_column_parse_keeps_number_texts() -> None:
    huge = "9" * 5000
    texts = ['{"a": -0, "b": 1.50}', None, f"[{huge}]", "2"]
    parsed = engine_parse_json_column(texts, canonical_ints=False)
    assert _shape(parsed[0]) == {"a": ("exact", "-0"), "b": ("exact", "1.50")}
    assert parsed[1] is None
    assert _shape(parsed[2]) == [("exact", huge)]  # too long for int: value by value
    assert parsed[3] == 2
    jsonb = engine_parse_json_column(
        ['{"n": 12345678901234567890}', f"{huge}"], canonical_ints=True
    )
    assert _shape(jsonb) == [{"n": ("int", 12345678901234567890)}, ("exact", huge)]


def test_fragments_read_back_as_exact_numbers() -> None:
    (value,) = parse_json_column(['{"a": [1.50, 2], "b": 1e5}'], canonical_ints=True)
    batch = FastRowBatch(["j", "k"], [[value], [1]], json_columns=[0])
    expected = {"j": {"a": [ExactNumber("1.50"), 2], "b": ExactNumber("1e5")}, "k": 1}
    assert _shape(batch[0]) == _shape(expected)
    assert _shape(next(iter(batch))) == _shape(expected)
    assert _fast_rows(batch) is not None
    assert _written([batch]) == _reference([batch])
    assert b'"a": [\n            1.50,\n' in _written([batch])


def _logical_of(values: list[object]) -> list[object]:
    """Parsed column values as a JSON column of a ``FastRowBatch`` reads them back."""
    return [row["j"] for row in FastRowBatch(["j"], [values], json_columns=[0])]


_WITHOUT_ORJSON = """
import asyncio, importlib, pkgutil, sys
sys.modules["orjson"] = None  # any import of orjson now raises ImportError
import fetcher.engine
for module in pkgutil.walk_packages(fetcher.engine.__path__, "fetcher.engine."):
    importlib.import_module(module.name)
from fetcher.engine.document import DatasourceWriter, MemorySpool, RowBatch
from fetcher.engine.values import parse_json_column

async def main() -> None:
    spool = MemorySpool()
    writer = DatasourceWriter(spool)
    await writer.open_table("t")
    (value,) = parse_json_column(['{"n": 1.50}'], canonical_ints=True)
    await writer.write_rows(RowBatch(["j"], [[value]], json_columns=[0]))
    await writer.close_table()
    await writer.close()
    sys.stdout.write(spool.getvalue().decode())

asyncio.run(main())
"""


def test_the_engine_writes_documents_without_orjson() -> None:
    """§1.4: the engine imports and writes JSON columns with orjson unavailable."""
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script, no shell
        [sys.executable, "-c", _WITHOUT_ORJSON], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert '"n": 1.50' in done.stdout
