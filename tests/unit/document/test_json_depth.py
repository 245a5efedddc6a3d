"""Values nested deeper than ``MAX_JSON_DEPTH`` (issue 12, hardening): the JSON column parsers
and every encoder on the way raise the engine's typed ``JsonDepthError`` (never a
``RecursionError``), naming the column once it is known; the runner turns it into the §4.5
query text; a value nested exactly ``MAX_JSON_DEPTH`` levels is written byte for byte as the
reference encoder writes it, whatever the caller's own stack depth.

Depth counts containers: ``1`` nests 0 levels, ``[1]`` 1, ``[[1]]`` 2."""

from __future__ import annotations

import asyncio
import json
import pickle
import sys
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any, TypeVar

import orjson
import pytest

from fetcher.adapters.jsonlayout.fastjson import (
    FastRowBatch,
    encode_batch_columns,
    encode_rows,
    parse_json_columns,
)
from fetcher.engine import ConnectionDescriptor, Engine, EngineError, ErrorCategory
from fetcher.engine.document import ROW_DEPTH, RowBatch, dumps_document
from fetcher.engine.errors import MAX_JSON_DEPTH, JsonDepthError, query_error
from fetcher.engine.model import ExtractionRequest
from fetcher.engine.ports import Row
from fetcher.engine.testing import FakeDatabase, FakeRegistry, MemorySink
from fetcher.engine.types import Column, EngineType, TableSchema, TypeFamily
from fetcher.engine.values import (
    encode_value,
    exceeds_json_depth,
    json_text_exceeds_depth,
    parse_json_column,
    parse_json_exact,
    parse_json_exact_fractions,
    too_deep_member,
)
from tests.unit.document.test_batches import _reference, _written

_T = TypeVar("_T")
#: PostgreSQL accepts this (``repeat('[', 3000) || repeat(']', 3000)``::jsonb).
VERY_DEEP = 3000


def nested_text(depth: int, *, kind: str = "[") -> str:
    """JSON text nesting ``depth`` arrays (``[``) or objects (``{``) around ``1``."""
    if kind == "[":
        return "[" * depth + "1" + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


def nested_value(depth: int, *, kind: type = list) -> object:
    """The value of :func:`nested_text`, built without recursion."""
    value: object = 1
    for _ in range(depth):
        value = [value] if kind is list else {"a": value}
    return value


def _stack_depth() -> int:
    frame: FrameType | None = sys._getframe()
    depth = 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def with_headroom(frames: int, function: Callable[..., _T], *args: Any) -> _T:
    """``function(*args)`` called so deep that only about ``frames`` Python frames remain
    before the recursion limit: a caller already deep in its own stack."""

    def down(remaining: int) -> _T:
        if remaining <= 0:
            return function(*args)
        return down(remaining - 1)

    return down(sys.getrecursionlimit() - _stack_depth() - frames)


# --- the error --------------------------------------------------------------------------------


def test_the_error_names_what_is_known_and_makes_the_query_text() -> None:
    bare = JsonDepthError()
    assert bare.detail == "a JSON value nested deeper than 250 levels"
    assert not isinstance(bare, ValueError)  # no "keep the text" fallback may swallow it
    located = bare.located(column="doc").located(column="other", table="public.t")
    assert located is bare
    assert located.detail == (
        "column 'doc' of table 'public.t' holds a JSON value nested deeper than 250 levels"
    )
    error = located.query_error("pg")
    assert error.category is ErrorCategory.UNAVAILABLE
    assert error.text() == (
        "failed to query datasource 'pg': "
        "column 'doc' of table 'public.t' holds a JSON value nested deeper than 250 levels"
    )
    assert query_error("pg", "x").text() == "failed to query datasource 'pg': x"


def test_the_error_crosses_a_process_boundary_with_its_names() -> None:
    copy = pickle.loads(pickle.dumps(JsonDepthError(column="c", table="t")))  # noqa: S301
    assert (copy.column, copy.table, str(copy)) == ("c", "t", copy.detail)


def test_the_bound_is_what_orjson_writes_inside_a_row() -> None:
    """``MAX_JSON_DEPTH`` is exactly the deepest value orjson writes in a row at the row depth
    (rows: the rows' array in two wrappers, then the row object), so the fast path never writes
    a value the engine's encoder refuses, nor declines one it writes."""
    for depth in (MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1):
        rows = [[[{"doc": nested_value(depth)}]]]
        fits = 4 + depth <= 254
        if fits:
            orjson.dumps(rows)
        else:
            with pytest.raises(orjson.JSONEncodeError):
                orjson.dumps(rows)
        assert fits is (depth <= MAX_JSON_DEPTH)


# --- measuring without recursion --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('"[[[["', 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["]]]", "\\"[[[", [{"k": "{"}]]', 3),
        ("[[1], [[2]], 3]", 3),
        (nested_text(VERY_DEEP, kind="{"), VERY_DEEP),
    ],
)
def test_text_depth_skips_strings(text: str, depth: int) -> None:
    assert json_text_exceeds_depth(text, depth) is False
    assert json_text_exceeds_depth(text, depth - 1) is (depth > 0)


def test_value_depth_counts_mappings_lists_and_tuples() -> None:
    assert exceeds_json_depth(nested_value(MAX_JSON_DEPTH)) is False
    assert exceeds_json_depth(nested_value(MAX_JSON_DEPTH + 1, kind=dict)) is True
    assert exceeds_json_depth(nested_value(50 * VERY_DEEP)) is True  # no recursion at all
    assert exceeds_json_depth(((1,),), 1) is True
    assert exceeds_json_depth("[[[", 0) is False
    rows = [{"a": 1, "b": [1]}, {"a": nested_value(MAX_JSON_DEPTH + 1), "b": None}]
    assert too_deep_member(rows) == "a"
    assert too_deep_member(rows[:1]) is None


# --- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parse",
    [parse_json_exact, parse_json_exact_fractions],
    ids=["exact", "fractions"],
)
@pytest.mark.parametrize("kind", ["[", "{"])
def test_a_text_too_deep_for_the_scanner_raises_the_typed_error(
    parse: Callable[[str | bytes], object], kind: str
) -> None:
    text = nested_text(VERY_DEEP, kind=kind)
    with pytest.raises(JsonDepthError):
        parse(text)
    with pytest.raises(JsonDepthError):
        parse(text.encode())  # bytes, as a driver may hand them


def test_a_column_with_a_value_too_deep_for_the_scanner_raises_the_typed_error() -> None:
    texts = ["[1.50]", None, nested_text(VERY_DEEP), '{"a": 2}']
    for canonical_ints in (True, False):
        with pytest.raises(JsonDepthError) as caught:
            parse_json_column(texts, canonical_ints=canonical_ints)
        assert caught.value.column is None  # the connector names it


def test_a_value_at_the_bound_parses_as_json_loads_reads_it() -> None:
    for kind in ("[", "{"):
        text = nested_text(MAX_JSON_DEPTH, kind=kind)
        expected = json.loads(text)
        assert parse_json_exact_fractions(text) == expected
        assert parse_json_column([text, None], canonical_ints=True) == [expected, None]


def test_parsing_does_not_depend_on_the_callers_stack() -> None:
    """Near the recursion limit the C scanner cannot descend 250 levels; the parser measures
    the text and parses it again on a fresh stack instead of failing, and still refuses a text
    that is really too deep."""
    at_bound = nested_text(MAX_JSON_DEPTH)
    with pytest.raises(RecursionError):
        with_headroom(120, json.loads, at_bound)  # what the parser meets there
    assert with_headroom(120, parse_json_exact_fractions, at_bound) == json.loads(at_bound)
    parse_column = partial(parse_json_column, canonical_ints=False)
    column = with_headroom(120, parse_column, [at_bound, "2"])
    assert column == [json.loads(at_bound), 2]
    with pytest.raises(JsonDepthError):
        with_headroom(120, parse_json_exact_fractions, nested_text(VERY_DEEP))


# --- encoding ---------------------------------------------------------------------------------


def test_encode_value_refuses_nesting_past_the_bound() -> None:
    assert encode_value(nested_value(MAX_JSON_DEPTH)) == nested_value(MAX_JSON_DEPTH)
    assert encode_value(((1,),)) == [[1]]
    with pytest.raises(JsonDepthError):
        encode_value(nested_value(MAX_JSON_DEPTH + 1, kind=dict))
    with pytest.raises(JsonDepthError):
        encode_value(nested_value(50 * VERY_DEEP))


def _batches_holding(value: object) -> list[list[Any]]:
    """The same two rows as every kind of batch the writer takes."""
    names = ("doc", "id")
    columns: list[list[object]] = [[value, None], [1, 2]]
    return [
        [{"doc": value, "id": 1}, {"doc": None, "id": 2}],  # dict rows
        RowBatch(names, columns),  # type: ignore[list-item]
        FastRowBatch(names, columns, json_columns=(0,)),  # type: ignore[list-item]
    ]


@pytest.mark.parametrize("kind", [list, dict])
def test_the_writer_writes_a_value_at_the_bound_as_the_reference_does(kind: type) -> None:
    value = nested_value(MAX_JSON_DEPTH, kind=kind)
    for batch in _batches_holding(value):
        written = _written([batch])
        assert written == _reference([batch])
        assert json.loads(written)["d"]["t"][0]["doc"] == value
    fast = FastRowBatch(("doc",), [[value]], json_columns=(0,))
    assert encode_rows(fast, ROW_DEPTH) is not None  # the orjson path wrote it


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 400, 50 * VERY_DEEP])
def test_the_writer_refuses_a_deeper_value_naming_its_column(depth: int) -> None:
    value = nested_value(depth, kind=dict)
    fast = FastRowBatch(("doc",), [[value]], json_columns=(0,))
    assert encode_rows(fast, ROW_DEPTH) is None  # orjson declines: the engine's writer refuses
    for batch in _batches_holding(value):
        with pytest.raises(JsonDepthError) as caught:
            _written([batch])
        assert caught.value.column == "doc"


def test_reading_a_fast_batch_refuses_a_deeper_value() -> None:
    fast = FastRowBatch(("doc",), [[nested_value(50 * VERY_DEEP)]], json_columns=(0,))
    with pytest.raises(JsonDepthError):
        list(fast)
    with pytest.raises(JsonDepthError):
        fast[0]


def test_writing_does_not_depend_on_the_callers_stack() -> None:
    value = nested_value(MAX_JSON_DEPTH, kind=dict)
    rows = [{"doc": value, "id": 1}]
    assert with_headroom(120, _written, [rows]) == _reference([rows])
    with pytest.raises(JsonDepthError):
        with_headroom(120, _written, [[{"doc": nested_value(400)}]])


# --- the encoder process's batch function, in-process ------------------------------------------


def test_a_batch_too_deep_is_declined_for_the_encoder_process() -> None:
    """The child declines (the host parses again and reports it, with the column's name)."""
    names = ("doc", "id")
    for text in (nested_text(MAX_JSON_DEPTH + 1), nested_text(VERY_DEEP)):
        assert encode_batch_columns(names, [[text], [1]], (0,), {0: True}) is None
    with pytest.raises(JsonDepthError) as caught:
        parse_json_columns([[nested_text(VERY_DEEP)], [1]], {0: True}, names)
    assert caught.value.column == "doc"
    at_bound = nested_text(MAX_JSON_DEPTH)
    encoded = encode_batch_columns(names, [[at_bound], [1]], (0,), {0: True})
    assert encoded is not None
    assert encoded in _reference([[{"doc": json.loads(at_bound), "id": 1}]])


# --- the runner -------------------------------------------------------------------------------

DEEP = TableSchema(
    "public", "deep", (Column("id", TypeFamily.INTEGER), Column("doc", TypeFamily.JSON))
)


def _run(value: object) -> tuple[bytes, int]:
    database = FakeDatabase()
    database.add(DEEP, [{"id": 1, "doc": value}, {"id": 2, "doc": None}])
    request = ExtractionRequest(job_id="job-1", mapped_fields={"pg": {"deep": ("id", "doc")}})
    connections = {"pg": ConnectionDescriptor(config_name="pg", type=EngineType.POSTGRESQL)}
    sink = MemorySink()
    result = asyncio.run(Engine(FakeRegistry({"pg": database})).run(request, connections, sink))
    return sink.data, result.row_count


def test_the_runner_fails_the_datasource_with_the_query_text() -> None:
    for value in (nested_value(MAX_JSON_DEPTH + 1), nested_value(50 * VERY_DEEP, kind=dict)):
        with pytest.raises(EngineError) as caught:
            _run(value)
        assert caught.value.category is ErrorCategory.UNAVAILABLE
        assert caught.value.text() == (
            "failed to query datasource 'pg': column 'doc' of table 'public.deep' holds a JSON "
            "value nested deeper than 250 levels"
        )


def test_the_runner_writes_a_value_at_the_bound() -> None:
    value = nested_value(MAX_JSON_DEPTH)
    data, rows = _run(value)
    assert rows == 2
    rows_of_deep: list[Row] = [{"doc": value, "id": 1}, {"doc": None, "id": 2}]
    expected = {"pg": {"deep": rows_of_deep}}
    assert data == dumps_document(expected)
    assert json.loads(data) == expected
