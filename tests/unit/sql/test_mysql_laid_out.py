"""Issue 23: MySQL batches laid out in C from the driver's rows (``jsonlayout.columns``) against the
connector's general path (its converters, then the engine's writer) on the same rows: every
batch the C layout accepts has the general path's bytes, and it declines whatever it does not
write exactly (no server here: the rows are what asyncmy hands over; the server-side
comparison is ``tests/integration/sql/test_mysql_laid_out.py``)."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fetcher.adapters.jsonlayout import columns as column_layout
from fetcher.adapters.jsonlayout.columns import (
    ColumnKind,
    LaidOutBatch,
    column_plan,
    layout_columns,
)
from fetcher.adapters.jsonlayout.fastjson import FastRowBatch
from fetcher.adapters.sql import mysql
from fetcher.engine.document import ROW_DEPTH, _rows_bytes
from fetcher.engine.errors import MAX_JSON_DEPTH
from fetcher.engine.types import Column, TypeFamily
from tests.unit.leaks import assert_no_leaks

native = pytest.mark.skipif(
    not column_layout.NATIVE,
    reason="the C extension fetcher.adapters.jsonlayout._native is not built",
)

#: The family whose general-path conversion each kind repeats.
_FAMILY = {
    ColumnKind.NUMBER: TypeFamily.INTEGER,
    ColumnKind.STRING: TypeFamily.TEXT,
    ColumnKind.DATETIME: TypeFamily.TIMESTAMP,
    ColumnKind.TIME: TypeFamily.TIME,
    ColumnKind.BYTES: TypeFamily.BYTES,
    ColumnKind.JSON: TypeFamily.JSON,
    ColumnKind.SCALAR: TypeFamily.OTHER,
    ColumnKind.FLOAT: TypeFamily.FLOAT,
}
#: The kinds the MySQL connector uses (the others are PostgreSQL's:
#: ``tests/unit/sql/test_postgres_laid_out.py``).
_MYSQL_KINDS = list(_FAMILY)


def _general(
    rows: Sequence[tuple[object, ...]], names: Sequence[str], kinds: Sequence[ColumnKind]
) -> bytes:
    """The general path's bytes: the connector's converters, then the engine's writer."""
    columns = [Column(name, _FAMILY[kind], "") for name, kind in zip(names, kinds, strict=True)]
    converters = [
        (index, convert)
        for index, column in enumerate(columns)
        if (convert := mysql._column_converter(column)) is not None
    ]
    converted = mysql._columns(rows, names, converters, "ds")
    json_columns = [i for i, kind in enumerate(kinds) if kind is ColumnKind.JSON]
    return bytes(_rows_bytes(FastRowBatch(names, converted, json_columns=json_columns)))


def _laid(
    rows: Sequence[tuple[object, ...]], names: Sequence[str], kinds: Sequence[ColumnKind]
) -> bytes | None:
    plan = column_plan(names, kinds)
    assert plan is not None
    return layout_columns(rows, plan)


def _same_or_declined(
    rows: Sequence[tuple[object, ...]], names: Sequence[str], kinds: Sequence[ColumnKind]
) -> bytes | None:
    laid = _laid(rows, names, kinds)
    if laid is not None:
        assert laid == _general(rows, names, kinds)
    return laid


# --- values as asyncmy hands them over ---------------------------------------------------------

_digits = st.text("0123456789", min_size=1, max_size=1)


@st.composite
def _datetime_text(draw: st.DrawFn) -> str:
    """The server's DATETIME/TIMESTAMP text: any digits in its shape (zero dates, zero months
    and days of a lax ``sql_mode``), with 0 to 6 fraction digits."""
    year = draw(st.sampled_from(["0000", "0001", "1970", "2024", "9999"]))
    month = draw(st.sampled_from(["00", "01", "12"]))
    day = draw(st.sampled_from(["00", "01", "29", "31"]))
    clock = draw(st.sampled_from(["00:00:00", "23:59:59", "03:04:05"]))
    precision = draw(st.integers(0, 6))
    fraction = "".join(draw(_digits) for _ in range(precision))
    return f"{year}-{month}-{day} {clock}" + (f".{fraction}" if precision else "")


@st.composite
def _time_text(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "-"]))
    hours = draw(st.sampled_from(["00", "23", "100", "838"]))
    precision = draw(st.integers(0, 6))
    fraction = "".join(draw(_digits) for _ in range(precision))
    return f"{sign}{hours}:59:0{draw(_digits)}" + (f".{fraction}" if precision else "")


#: Number texts written as they are (any other str leaf is a JSON string).
_NUMBER_TEXTS = ["0.1250", "-0", "1E+2", "2e3", "-0.0e-1", "1e400", "12345678901234567890"]
_json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.text(max_size=8),
    st.sampled_from(_NUMBER_TEXTS),
)
_json_values = st.recursive(
    _json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


def _json_text(value: object, spaced: bool) -> str:
    """A JSON text; number texts (the sampled strings) stay as written."""

    def dump(item: object) -> str:
        if item in _NUMBER_TEXTS:
            return str(item)
        if isinstance(item, list):
            return ("[" + (", " if spaced else ",").join(map(dump, item)) + "]") if item else "[]"
        if isinstance(item, dict):
            sep = ": " if spaced else ":"
            members = (json.dumps(k, ensure_ascii=False) + sep + dump(v) for k, v in item.items())
            return "{" + (", " if spaced else ",").join(members) + "}"
        return json.dumps(item, ensure_ascii=bool(spaced))

    return dump(value)


_VALUES: dict[ColumnKind, st.SearchStrategy[object]] = {
    ColumnKind.NUMBER: st.integers(-(2**70), 2**70),
    ColumnKind.STRING: st.text(),
    ColumnKind.DATETIME: _datetime_text(),
    ColumnKind.TIME: _time_text(),
    ColumnKind.BYTES: st.binary(max_size=40) | st.binary(max_size=5).map(bytearray),
    ColumnKind.JSON: st.builds(_json_text, _json_values, st.booleans()),
    ColumnKind.SCALAR: st.one_of(st.text(max_size=10), st.integers(), st.binary(max_size=6)),
    ColumnKind.FLOAT: st.floats() | st.sampled_from([0.1, 100.0, -0.0, 1e16, 5e-324, 1e300]),
}


@st.composite
def _table(draw: st.DrawFn) -> tuple[list[str], list[ColumnKind], list[tuple[object, ...]]]:
    names = draw(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=7, unique=True))
    kinds = [draw(st.sampled_from(_MYSQL_KINDS)) for _ in names]
    count = draw(st.integers(1, 6))
    rows = [tuple(draw(st.none() | _VALUES[kind]) for kind in kinds) for _ in range(count)]
    return names, kinds, rows


@native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_table())
def test_generated_rows_are_the_general_paths_bytes(
    table: tuple[list[str], list[ColumnKind], list[tuple[object, ...]]],
) -> None:
    names, kinds, rows = table
    assert _same_or_declined(rows, names, kinds) is not None  # every value here is covered


def _view(data: bytes) -> memoryview:
    return memoryview(data)


#: Every value type any kind takes, and the str forms of numbers: drawn for every column
#: whatever its kind (issue 39: a NUMBER column met only ints here).
_ANY_VALUE: st.SearchStrategy[object] = st.one_of(
    *_VALUES.values(),
    st.booleans(),
    st.sampled_from(["23", "-0", "1.5", "1e3", "0x1", " 1"]),
    st.binary(max_size=6).map(_view),
)


@st.composite
def _mixed_table(draw: st.DrawFn) -> tuple[list[str], list[ColumnKind], list[tuple[object, ...]]]:
    names = draw(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=5, unique=True))
    kinds = [draw(st.sampled_from(_MYSQL_KINDS)) for _ in names]
    count = draw(st.integers(1, 4))
    rows = [tuple(draw(st.none() | _ANY_VALUE) for _ in kinds) for _ in range(count)]
    return names, kinds, rows


@native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mixed_table())
def test_any_value_in_any_column_is_the_general_paths_bytes_or_declines(
    table: tuple[list[str], list[ColumnKind], list[tuple[object, ...]]],
) -> None:
    """Issue 39: whatever type each value of each column has, a batch the C layout accepts is
    written exactly as the general path writes it (which must not raise on it)."""
    names, kinds, rows = table
    if any(any(0xD800 <= ord(c) <= 0xDFFF for c in name) for name in names):
        return  # a name without UTF-8 has no plan (test_plans_are_refused_where_...)
    _same_or_declined(rows, names, kinds)


@native
def test_a_number_column_holding_a_str_declines_whatever_else_its_batch_holds() -> None:
    """Issue 39: asyncmy hands over a ``str`` for a column discovery said is INTEGER when the
    result column is not one (a server that lies, an ``ALTER TABLE`` since discovery); the
    general path writes it as a string, so the C layout declines it alone or in company (it
    wrote a bare number when the batch held nothing else)."""
    plan = column_plan(["n"], [ColumnKind.NUMBER])
    assert plan is not None
    assert layout_columns([("23",)], plan) is None
    assert layout_columns([("23",), ("x",)], plan) is None
    assert b'"n": "23"' in _general([("23",)], ["n"], [ColumnKind.NUMBER])
    assert layout_columns([(23,)], plan) == _general([(23,)], ["n"], [ColumnKind.NUMBER])


@native
def test_the_values_of_each_kind_in_detail() -> None:
    names = ["n", "s", "dt", "t", "b", "j", "o", "f"]
    kinds = _MYSQL_KINDS
    rows = [
        (2**64 + 1, 'q"\\\x01\n é😀', "2024-01-02 03:04:05.120000", "-838:59:59.000000",
         b"\x00\xff", '{"b": 1.50, "a": [-0, 1E+2]}', "u-u-i-d", 0.1),
        (-5, "", "0000-00-00 00:00:00", "100:00:00.5", bytearray(b"ab"), "[]", 7, 1e16),
        (None, None, "2024-01-00 00:00:00.000", "00:00:00", b"", "null", b"\x01\x02\x03",
         float("nan")),
    ]  # fmt: skip
    laid = _same_or_declined(rows, names, kinds)
    assert laid is not None
    rows_back = json.loads(b"[" + laid + b"]")
    assert [row["dt"] for row in rows_back] == [
        "2024-01-02T03:04:05.12Z",
        "0000-00-00 00:00:00",
        "2024-01-00 00:00:00",
    ]
    assert [row["t"] for row in rows_back] == ["-838:59:59", "100:00:00.5", "00:00:00"]
    assert [row["b"] for row in rows_back] == ["AP8=", "YWI=", ""]
    assert [row["o"] for row in rows_back] == ["u-u-i-d", 7, "AQID"]
    assert [row["f"] for row in rows_back] == [0.1, 1e16, "NaN"]
    assert b'"f": 1e+16' in laid
    assert b'"j": {\n          "a": [\n            -0,\n            1E+2\n' in laid
    assert list(rows_back[0]) == sorted(names)


#: A value each kind does not write exactly as the general path would: the batch declines.
_DECLINED: list[tuple[ColumnKind, object]] = [
    (ColumnKind.NUMBER, 1.5),
    (ColumnKind.NUMBER, True),
    (ColumnKind.NUMBER, "01"),
    (ColumnKind.NUMBER, "23"),
    (ColumnKind.NUMBER, 2.0),
    (ColumnKind.NUMBER, "1.5e"),
    (ColumnKind.STRING, b"bytes"),
    (ColumnKind.STRING, "lone \ud800"),
    (ColumnKind.STRING, 5),
    (ColumnKind.DATETIME, "2024-01-02T03:04:05"),
    (ColumnKind.DATETIME, "2024-01-02 03:04:05."),
    (ColumnKind.DATETIME, "2024-01-02 03:04:05.1234567"),
    (ColumnKind.DATETIME, "2024-1-02 03:04:05"),
    (ColumnKind.DATETIME, "10000-01-02 03:04:05"),
    (ColumnKind.DATETIME, "2024-01-02 03:04"),
    (ColumnKind.TIME, "10:00:00 "),
    (ColumnKind.TIME, '"'),
    (ColumnKind.BYTES, "text"),
    (ColumnKind.BYTES, memoryview(b"x")),
    (ColumnKind.JSON, "1."),
    (ColumnKind.JSON, "[-]"),
    (ColumnKind.JSON, '"\\x"'),
    (ColumnKind.JSON, "not json"),
    (ColumnKind.JSON, '{"a": 1, "a": 2}'),
    (ColumnKind.JSON, '"\\ud800"'),
    (ColumnKind.JSON, "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)),
    (ColumnKind.JSON, b"[1]"),
    (ColumnKind.SCALAR, 0.5),
    (ColumnKind.FLOAT, 1),
    (ColumnKind.FLOAT, "0.1"),
    (ColumnKind.SCALAR, None.__class__),
]


@native
@pytest.mark.parametrize(("kind", "value"), _DECLINED, ids=lambda item: repr(item)[:40])
def test_a_value_outside_its_kind_declines_the_batch(kind: ColumnKind, value: object) -> None:
    plan = column_plan(["id", "v"], [ColumnKind.NUMBER, kind])
    assert plan is not None
    assert layout_columns([(1, None), (2, value)], plan) is None


@native
def test_json_at_the_bound_is_laid_out_and_past_it_declines() -> None:
    at = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert _same_or_declined([(at,)], ["j"], [ColumnKind.JSON]) is not None


@native
@pytest.mark.parametrize(
    "rows",
    [[(1, 2, 3)], [(1,)], [[1, 2]], ["ab"], [None]],
    ids=["wider", "narrower", "a list", "a str", "None"],
)
def test_a_row_of_another_shape_declines(rows: list[object]) -> None:
    plan = column_plan(["a", "b"], [ColumnKind.NUMBER, ColumnKind.NUMBER])
    assert plan is not None
    assert layout_columns([(1, 2), *rows], plan) is None  # type: ignore[list-item]


def test_plans_are_refused_where_nothing_can_be_laid_out() -> None:
    assert column_plan([], []) is None
    assert column_plan(["a", "a"], [ColumnKind.NUMBER, ColumnKind.NUMBER]) is None
    assert column_plan(["lone \ud800"], [ColumnKind.NUMBER]) is None


@native
def test_keys_are_escaped_and_sorted_by_code_point() -> None:
    names = ["€", "b", 'q"\\', "a\x01", "😀", "\ue000", "B"]
    kinds = [ColumnKind.NUMBER] * len(names)
    rows = [tuple(range(len(names)))]
    laid = _same_or_declined(rows, names, kinds)
    assert laid is not None
    assert list(json.loads(laid)) == sorted(names)


@native
def test_the_arguments_are_checked() -> None:
    from fetcher.adapters.jsonlayout import _native as _json_layout

    native_layout: Any = _json_layout.layout_columns  # called with wrong arguments below
    good = ((0,), (b'"a"',), bytes([ColumnKind.NUMBER]), 3, 10)
    assert native_layout([(1,)], *good) is not None
    with pytest.raises(TypeError):
        native_layout([(1,)], *good[:4])
    with pytest.raises(TypeError):
        native_layout([(1,)], [0], *good[1:])
    with pytest.raises(ValueError, match="as long"):
        native_layout([(1,)], (0, 1), *good[1:])
    with pytest.raises(ValueError, match="known kinds"):
        native_layout([(1,)], (0,), (b'"a"',), bytes([99]), 3, 10)
    with pytest.raises(ValueError, match="known kinds"):
        native_layout([(1,)], (5,), *good[1:])
    with pytest.raises(ValueError, match="depth"):
        native_layout([(1,)], *good[:3], -1, 10)
    with pytest.raises(TypeError, match="sequence"):
        native_layout(5, *good)


@native
def test_a_laid_out_batch_reads_as_the_general_paths_batch() -> None:
    rows = [(1, '{"b": 2.50, "a": null}'), (2, None)]
    names, kinds = ["id", "doc"], [ColumnKind.NUMBER, ColumnKind.JSON]
    laid = _laid(rows, names, kinds)
    assert laid is not None
    columns: list[Sequence[object]] = [[1, 2], mysql._json_column([rows[0][1], None])]
    general = FastRowBatch(names, columns, json_columns=[1])
    converted: list[int] = []

    def convert() -> list[Sequence[object]]:
        converted.append(1)
        return columns

    batch = LaidOutBatch(names, 2, laid, convert, json_columns=[1])
    assert batch.encoded_rows(ROW_DEPTH) is laid
    assert not converted  # the writer never reads the rows
    assert len(batch) == 2
    assert list(batch) == list(general)
    assert batch[1] == {"id": 2, "doc": None}
    assert converted == [1]
    assert batch.encoded_rows(2) == general.encoded_rows(2)
    assert repr(batch) == "LaidOutBatch(('id', 'doc'), 2 rows)"


@native
def test_no_leaks_on_any_path() -> None:
    plan = column_plan(["a", "b", "c"], [ColumnKind.SCALAR, ColumnKind.JSON, ColumnKind.NUMBER])
    assert plan is not None
    rows: list[tuple[object, ...]] = [("é" * 40, '{"x": [1, "é"]}', 2**80), (b"zz", "[]", -1)]
    bad = [*rows, ("x", "not json", 1)]
    calls: list[Callable[[], object]] = [
        lambda: layout_columns(rows, plan),
        lambda: layout_columns(bad, plan),
        lambda: layout_columns([*rows, (1.5, "1", 1)], plan),
    ]
    assert_no_leaks(calls, [value for row in rows for value in row], rounds=300)


@native
def test_a_large_text_grows_the_output_by_what_it_takes() -> None:
    """An escaped string reserves its escaped length, not six bytes per byte: 8 MiB of text
    with one quote costs about 8 MiB of output, not 48."""
    text = "x" * (8 << 20) + '"'
    plan = column_plan(["t"], [ColumnKind.STRING])
    assert plan is not None
    tracemalloc.start()
    try:
        laid = layout_columns([(text,)], plan)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert laid is not None
    assert len(laid) < (8 << 20) + 64
    assert peak < 20 << 20, peak


def test_without_the_native_module_every_batch_declines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(column_layout, "_native", None)
    assert column_plan(["a"], [ColumnKind.NUMBER]) is None
    plan = column_layout.ColumnPlan((0,), (b'"a"',), bytes([ColumnKind.NUMBER]))
    assert layout_columns([(1,)], plan) is None


@native
def test_mysql_plans_cover_every_family_the_connector_finds() -> None:
    def plan(family: TypeFamily) -> object:
        return mysql.layout_plan([Column("id", TypeFamily.INTEGER, "int"), Column("v", family, "")])

    assert {family for family in TypeFamily if plan(family) is not None} == {
        TypeFamily.INTEGER, TypeFamily.DECIMAL, TypeFamily.TEXT, TypeFamily.DATE,
        TypeFamily.TIMESTAMP, TypeFamily.TIMESTAMPTZ, TypeFamily.TIME, TypeFamily.BYTES,
        TypeFamily.JSON, TypeFamily.OTHER, TypeFamily.FLOAT,
    }  # fmt: skip
