"""Issue 23: PostgreSQL batches laid out in C from the driver's tuples (``postgres.layout_plan``
+ ``jsonlayout.columns``) against the connector's general path (its converters by result type, then
the engine's writer) on the same tuples: every batch the C layout accepts has the general
path's bytes, and it declines whatever it does not write exactly. The tuples are what the
connection's loaders hand over (``int``, ``bool``, the float loaders' floats and strings,
``str`` texts); the server-side comparison is
``tests/integration/sql/test_postgres_laid_out.py``."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fetcher.adapters.jsonlayout import columns as column_layout
from fetcher.adapters.jsonlayout.columns import layout_columns
from fetcher.adapters.jsonlayout.fastjson import FastRowBatch
from fetcher.adapters.sql import postgres
from fetcher.engine.document import _rows_bytes
from fetcher.engine.ports import TableQuery
from fetcher.engine.types import Column, TableSchema, TypeFamily
from fetcher.engine.values import encode_bytes, encode_float32
from tests.unit.leaks import assert_no_leaks

native = pytest.mark.skipif(
    not column_layout.NATIVE,
    reason="the C extension fetcher.adapters.jsonlayout._native is not built",
)

_OID = {name: psycopg.postgres.types[name].oid for name in (
    "int4", "int8", "bool", "float4", "float8", "text", "numeric", "uuid", "date", "time",
    "bytea", "json", "jsonb", "timestamp", "timestamptz", "inet", "interval",
)}  # fmt: skip
_OID["_int4"] = psycopg.postgres.types["int4"].array_oid
_OID["enum"] = 987_654  # a user type's oid: read by loader 0 as its text
_FAMILY = {
    "int4": TypeFamily.INTEGER, "int8": TypeFamily.INTEGER, "bool": TypeFamily.BOOLEAN,
    "float4": TypeFamily.FLOAT, "float8": TypeFamily.FLOAT, "text": TypeFamily.TEXT,
    "numeric": TypeFamily.DECIMAL, "uuid": TypeFamily.UUID, "date": TypeFamily.DATE,
    "time": TypeFamily.TIME, "bytea": TypeFamily.BYTES, "json": TypeFamily.JSON,
    "jsonb": TypeFamily.JSON, "timestamp": TypeFamily.TIMESTAMP,
    "timestamptz": TypeFamily.TIMESTAMPTZ, "inet": TypeFamily.OTHER,
    "interval": TypeFamily.OTHER, "_int4": TypeFamily.ARRAY, "enum": TypeFamily.TEXT,
}  # fmt: skip


def _columns(names: Sequence[str], types: Sequence[str]) -> list[Column]:
    return [Column(name, _FAMILY[kind], kind) for name, kind in zip(names, types, strict=True)]


def _description(types: Sequence[str]) -> list[psycopg.Column]:
    """A cursor description of ``types`` (only ``type_code`` is read)."""
    return [type("Described", (), {"type_code": _OID[kind]})() for kind in types]


def _plan(names: Sequence[str], types: Sequence[str]) -> column_layout.ColumnPlan | None:
    table = TableSchema(schema="public", name="t", columns=tuple(_columns(names, types)))
    return postgres.layout_plan(TableQuery(table, table.columns), _description(types))


def _general(
    rows: Sequence[tuple[object, ...]], names: Sequence[str], types: Sequence[str]
) -> bytes:
    """The general path's bytes: the connector's converters by result type, then the writer."""
    columns = _columns(names, types)
    converters = [
        (index, convert)
        for index, (column, kind) in enumerate(zip(columns, types, strict=True))
        if (convert := postgres._column_converter(column, _OID[kind], None)) is not None
    ]
    converted = postgres._columns(list(rows), converters, names, "ds")
    json_columns = postgres._json_columns(columns)
    return bytes(_rows_bytes(FastRowBatch(names, converted, json_columns=json_columns)))


def _same_or_declined(
    rows: Sequence[tuple[object, ...]], names: Sequence[str], types: Sequence[str]
) -> bytes | None:
    plan = _plan(names, types)
    assert plan is not None
    laid = layout_columns(rows, plan)
    if laid is not None:
        assert laid == _general(rows, names, types)
    return laid


# --- values as the connection's loaders hand them over -----------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]))  # the C loader decodes strict UTF-8


@st.composite
def _stamp_text(draw: st.DrawFn, zoned: bool) -> str:
    """A timestamp(tz) as a UTC, ISO-DateStyle session prints it: years 1..9999 with 0 to 6
    fraction digits (no trailing zero), or infinity, BC and five-digit years."""
    zone = "+00" if zoned else ""
    special = [
        "infinity",
        "-infinity",
        f"0044-03-15 12:00:00{zone} BC",
        f"10000-01-01 00:00:00{zone}",
    ]
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(special))
    year = draw(st.sampled_from(["0001", "1970", "2024", "9999"]))
    clock = draw(st.sampled_from(["00:00:00", "23:59:59", "03:04:05"]))
    fraction = draw(st.sampled_from(["", ".5", ".12", ".000001", ".999999", ".123456"]))
    return f"{year}-02-29 {clock}{fraction}" + ("+00" if zoned else "")


_json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
)
_json_values = st.recursive(
    _json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.characters(exclude_categories=["Cs"]), max_size=4), inner)
    ),
    max_leaves=12,
)

_VALUES: dict[str, st.SearchStrategy[object]] = {
    "int4": st.integers(-(2**31), 2**31 - 1),
    "int8": st.integers(-(2**63), 2**63 - 1),
    "bool": st.booleans(),
    "float4": st.floats(allow_nan=False, allow_infinity=False, width=32).map(encode_float32),
    "float8": st.floats(allow_nan=False, allow_infinity=False),
    "text": _text,
    "numeric": st.sampled_from(["0", "-1.50", "NaN", "Infinity", "1e-20", "123.000001"]),
    "uuid": st.uuids().map(str),
    "date": st.sampled_from(["2024-02-29", "infinity", "0044-03-15 BC", "12345-01-01"]),
    "time": st.sampled_from(["00:00:00", "24:00:00", "12:30:00.5"]),
    "bytea": st.binary(max_size=12).map(encode_bytes),
    "json": st.builds(
        json.dumps, _json_values, ensure_ascii=st.booleans(), indent=st.sampled_from([None, 1])
    ),
    "jsonb": st.builds(json.dumps, _json_values, ensure_ascii=st.just(False)),
    "timestamp": _stamp_text(False),
    "timestamptz": _stamp_text(True),
    "interval": st.sampled_from(["P1D", "-PT1S", "P1Y2M"]),
    "enum": _text,
}


@st.composite
def _table(draw: st.DrawFn) -> tuple[list[str], list[str], list[tuple[object, ...]]]:
    names = draw(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=7, unique=True))
    names = [name for name in names if "\ud800" > name or name > "\udfff"] or ["a"]
    types = [draw(st.sampled_from(list(_VALUES))) for _ in names]
    count = draw(st.integers(1, 6))
    rows = [tuple(draw(st.none() | _VALUES[kind]) for kind in types) for _ in range(count)]
    return names, types, rows


@native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_table())
def test_generated_rows_are_the_general_paths_bytes(
    table: tuple[list[str], list[str], list[tuple[object, ...]]],
) -> None:
    names, types, rows = table
    if any(any(0xD800 <= ord(c) <= 0xDFFF for c in name) for name in names):
        return  # a name without UTF-8 has no plan (tests/unit/sql/test_mysql_laid_out.py)
    assert _same_or_declined(rows, names, types) is not None  # every value here is covered


#: Every value type the loaders hand over for any type, and a few no loader does (``bytes``,
#: ``bytearray``, a non-finite float, a number's text): drawn for every column whatever its
#: result type (issue 39: each column met only its own loader's values here).
_ANY_VALUE: st.SearchStrategy[object] = st.one_of(
    *_VALUES.values(),
    st.floats(),
    st.binary(max_size=6),
    st.binary(max_size=6).map(bytearray),
    st.sampled_from(["23", "-0", "1.5", "1e3", "NaN", "t", "2024-01-02 03:04:05"]),
)


@st.composite
def _mixed_table(draw: st.DrawFn) -> tuple[list[str], list[str], list[tuple[object, ...]]]:
    names = draw(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=5, unique=True))
    names = [name for name in names if "\ud800" > name or name > "\udfff"] or ["a"]
    types = [draw(st.sampled_from(list(_VALUES))) for _ in names]
    count = draw(st.integers(1, 4))
    rows = [tuple(draw(st.none() | _ANY_VALUE) for _ in types) for _ in range(count)]
    return names, types, rows


@native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mixed_table())
def test_any_value_in_any_column_is_the_general_paths_bytes_or_declines(
    table: tuple[list[str], list[str], list[tuple[object, ...]]],
) -> None:
    """Issue 39: whatever type each value of each column has, a batch the C layout accepts is
    written exactly as the general path writes it (which must not raise on it)."""
    names, types, rows = table
    if any(any(0xD800 <= ord(c) <= 0xDFFF for c in name) for name in names):
        return  # a name without UTF-8 has no plan (tests/unit/sql/test_mysql_laid_out.py)
    _same_or_declined(rows, names, types)


@native
def test_an_integer_minus_zero_declines_in_jsonb_and_is_kept_in_json() -> None:
    """A fuzz finding (``make fuzz``, issue 34): the general path reads a ``jsonb`` column's
    integers as ``int`` (PostgreSQL prints them canonically: ``'[-0]'::jsonb`` is ``[0]``), so
    an integer ``-0`` there is written ``0``, where the C layout copied ``-0``; it now declines
    it in ``jsonb`` and keeps it in ``json``, whose general path keeps it too."""
    assert _same_or_declined([("[-0]",)], ["j"], ["jsonb"]) is None
    assert _same_or_declined([('{"a": -0}',)], ["j"], ["jsonb"]) is None
    assert _same_or_declined([("[-0.0, 0, -1, 10]",)], ["j"], ["jsonb"]) is not None
    laid = _same_or_declined([("[-0]",)], ["j"], ["json"])
    assert laid is not None
    assert b"-0\n" in laid


@native
def test_the_values_of_each_kind_in_detail() -> None:
    names = ["b", "f4", "f8", "ts", "tz", "j", "e"]
    types = ["bool", "float4", "float8", "timestamp", "timestamptz", "json", "enum"]
    rows = [
        (True, encode_float32(0.1), 1e16, "2024-01-02 03:04:05.12",
         "2024-01-02 03:04:05+00", ' {"b": 1.50, "a": [-0, 1E+2]} ', 'é "q"'),
        (False, -0.0, 5e-324, "infinity", "0044-03-15 12:00:00+00 BC", "[]", ""),
        (None, None, None, "10000-01-01 00:00:00", "-infinity", "null", None),
    ]  # fmt: skip
    laid = _same_or_declined(rows, names, types)
    assert laid is not None
    back = json.loads(b"[" + laid + b"]")
    assert [row["b"] for row in back] == [True, False, None]
    assert [row["f4"] for row in back] == [0.1, -0.0, None]
    assert b'"f8": 1e+16' in laid
    assert [row["ts"] for row in back] == [
        "2024-01-02T03:04:05.12Z", "infinity", "10000-01-01 00:00:00",
    ]  # fmt: skip
    assert [row["tz"] for row in back] == [
        "2024-01-02T03:04:05Z", "0044-03-15 12:00:00+00 BC", "-infinity",
    ]  # fmt: skip
    assert b'"j": {\n          "a": [\n            -0,\n            1E+2\n' in laid
    assert [row["e"] for row in back] == ['é "q"', "", None]


_stamp_like = st.one_of(
    st.text(max_size=30),
    st.text("0123456789-: .+BCinfty\u00e9", max_size=30),
    st.builds(
        lambda text, at, junk: text[:at] + junk + text[at + len(junk) :],
        _stamp_text(True) | _stamp_text(False),
        st.integers(0, 28),
        st.text("0a -+:.\u00e9BC", min_size=1, max_size=3),
    ),
)


@native
@settings(max_examples=500, deadline=None)
@given(st.lists(_stamp_like, min_size=1, max_size=4), st.booleans())
def test_hostile_timestamp_texts_are_the_general_paths_or_declined(
    texts: list[str], zoned: bool
) -> None:
    """A source server chooses a timestamp column's texts: whatever they are, the layout
    writes what the general path writes, or declines the batch."""
    kind = "timestamptz" if zoned else "timestamp"
    _same_or_declined([(text,) for text in texts], ["ts"], [kind])


#: A value each PostgreSQL kind does not write exactly as the general path would: the batch
#: declines (and the general path writes it).
_DECLINED: list[tuple[str, object]] = [
    ("bool", 1),
    ("int4", "23"),
    ("int8", 1.0),
    ("int4", True),
    ("bool", "t"),
    ("float8", "NaN"),
    ("float8", "-Infinity"),
    ("float4", 1),
    ("timestamp", 5),
    ("timestamptz", b"2024-01-02 03:04:05+00"),
    ("json", '{"a": 1, "a": 2}'),
    ("text", b"bytes"),
]


@native
@pytest.mark.parametrize(("kind", "value"), _DECLINED, ids=lambda item: repr(item)[:40])
def test_a_value_outside_its_kind_declines_the_batch(kind: str, value: object) -> None:
    plan = _plan(["id", "v"], ["int4", kind])
    assert plan is not None
    assert layout_columns([(1, None), (2, value)], plan) is None


@native
def test_plans_cover_scalars_json_timestamps_and_text_types_only() -> None:
    covered = {kind for kind in _OID if _plan(["id", "v"], ["int4", kind]) is not None}
    assert covered == set(_OID) - {"inet", "_int4"}  # arrays and driver objects: general path
    assert _plan(["a"], ["int4", "int4"][:1]) is not None
    table = TableSchema(schema="public", name="t", columns=tuple(_columns(["a"], ["int4"])))
    # a result of another width than the query is the general path's error to raise
    assert (
        postgres.layout_plan(TableQuery(table, table.columns), _description(["int4"] * 2)) is None
    )


@native
def test_no_leaks_on_the_postgresql_kinds() -> None:
    plan = _plan(["b", "f", "ts", "tz"], ["bool", "float8", "timestamp", "timestamptz"])
    assert plan is not None
    rows: list[tuple[object, ...]] = [
        (True, 0.5, "2024-01-02 03:04:05", "2024-01-02 03:04:05.5+00"),
        (None, 1e300, "infinity", "é" * 30),
    ]
    calls: list[Callable[[], object]] = [
        lambda: layout_columns(rows, plan),
        lambda: layout_columns([*rows, (1, 0.5, "x", "y")], plan),
        lambda: layout_columns([*rows, (True, "NaN", "x", "y")], plan),
    ]
    assert_no_leaks(calls, [value for row in rows for value in row], rounds=300)
