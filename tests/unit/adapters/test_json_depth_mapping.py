"""Values nested deeper than ``MAX_JSON_DEPTH`` in each connector (issue 12, hardening): the
converters raise the engine's ``JsonDepthError`` naming the column, and each connector's
query-error mapping turns it into the §4.5 query text naming the table, never
``internal error``. The connectors' own paths against real servers are in
``tests/integration`` and ``tests/e2e/test_deep_json.py``."""

from __future__ import annotations

import struct
from collections.abc import Callable
from contextlib import AbstractContextManager
from decimal import Decimal
from typing import Any

import bson
import pytest

from fetcher.adapters.mongodb import _rows, map_mongo_errors
from fetcher.adapters.sql import mysql, oracle, postgres
from fetcher.adapters.sql._common import Phase, translate_errors
from fetcher.engine.errors import MAX_JSON_DEPTH, EngineError, ErrorCategory, JsonDepthError
from fetcher.engine.types import Column, TableSchema, TypeFamily
from fetcher.engine.values import exceeds_json_depth
from tests.unit.document.test_json_depth import VERY_DEEP, nested_text, nested_value

TABLE = TableSchema("public", "deep", (Column("id", TypeFamily.INTEGER),))
COLLECTION = TableSchema("", "events", ())


def _text(column: str | None, table: str) -> str:
    where = f"column '{column}' of " if column is not None else ""
    return (
        f"failed to query datasource 'ds': {where}table '{table}' holds a JSON value nested "
        f"deeper than {MAX_JSON_DEPTH} levels"
    )


Mapping = Callable[[Phase, str, TableSchema | None], AbstractContextManager[None]]


@pytest.mark.parametrize(
    "mapping",
    [
        postgres.map_postgres_errors,
        mysql.map_mysql_errors,
        oracle.map_oracle_errors,
        map_mongo_errors,
        lambda phase, ds, table: translate_errors(phase, ds, (), table=table),
    ],
    ids=["postgres", "mysql", "oracle", "mongodb", "shared"],
)
def test_every_query_mapping_gives_the_query_text(mapping: Mapping) -> None:
    with pytest.raises(EngineError) as caught, mapping(Phase.QUERY, "ds", TABLE):
        raise JsonDepthError(column="doc")
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.text() == _text("doc", "public.deep")
    assert caught.value.__cause__ is None  # nothing of the value travels with it


def _deep_bson_document(depth: int) -> bytes:
    """``{"doc": {"a": {"a": … 1}}}`` nesting ``depth`` documents, encoded without recursion."""
    element = b"\x10a\x00" + struct.pack("<i", 1)
    for _ in range(depth):
        document = struct.pack("<i", len(element) + 5) + element + b"\x00"
        element = b"\x03a\x00" + document
    body = b"\x03doc" + element[2:]
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def test_a_document_too_deep_for_the_bson_decoder_gives_the_query_text() -> None:
    data = _deep_bson_document(VERY_DEEP)
    with pytest.raises(EngineError) as caught, map_mongo_errors(Phase.QUERY, "ds", COLLECTION):
        bson.decode(data)  # what pymongo's cursor runs on a reply
    assert caught.value.text() == _text(None, "events")
    with pytest.raises(EngineError) as other, map_mongo_errors(Phase.QUERY, "ds", COLLECTION):
        bson.decode(b"\x05\x00\x00\x00\x01")  # any other invalid BSON keeps its own detail
    assert "nested" not in other.value.text()


def _mongo_documents(depth: int) -> list[dict[str, Any]]:
    return [
        {"_id": 1, "kind": "a", "doc": {"x": 1}},
        {"_id": 2, "kind": "b", "doc": nested_value(depth, kind=dict)},
    ]


@pytest.mark.parametrize("names", [None, ("_id", "doc")], ids=["wildcard", "named"])
@pytest.mark.parametrize("depth", [400, 50 * VERY_DEEP])
def test_mongodb_rows_too_deep_name_the_field(names: tuple[str, ...] | None, depth: int) -> None:
    """A field deep enough to exhaust the converter's recursion (three frames a level) is
    measured and named; one a little past the bound may pass the connector, and is then
    refused by the engine's writer (``tests/unit/document/test_json_depth.py``)."""
    with pytest.raises(JsonDepthError) as caught:
        _rows(_mongo_documents(depth), names)
    assert caught.value.column == "doc"


def test_mongodb_rows_at_the_bound_are_converted() -> None:
    rows = _rows(_mongo_documents(MAX_JSON_DEPTH), None)
    assert [dict(row) for row in rows][1]["doc"] == nested_value(MAX_JSON_DEPTH, kind=dict)


def test_postgres_columns_name_the_column() -> None:
    rows = [(1, nested_text(VERY_DEEP)), (2, None)]
    converter = postgres._column_converter(  # jsonb
        Column("doc", TypeFamily.JSON), next(iter(postgres._JSON_OIDS)), None
    )
    assert converter is not None
    with pytest.raises(JsonDepthError) as caught:
        postgres._columns(rows, [(1, converter)], ("id", "doc"), "ds")
    assert caught.value.column == "doc"
    arrays = [(1, [nested_text(VERY_DEEP)])]  # json[]: each element parsed
    with pytest.raises(JsonDepthError) as in_array:
        postgres._columns(arrays, [(1, postgres._json_array_column)], ("id", "docs"), "ds")
    assert in_array.value.column == "docs"
    at_bound = postgres._columns(
        [(1, nested_text(MAX_JSON_DEPTH))], [(1, converter)], ("i", "d"), "ds"
    )
    assert at_bound[1] == [nested_value(MAX_JSON_DEPTH)]


def test_mysql_json_columns_name_the_column_and_never_keep_deep_text() -> None:
    """A JSON value too deep is not "text that is not JSON" (which stays a string)."""
    converter = mysql._column_converter(Column("doc", TypeFamily.JSON))
    assert converter is not None
    for values in ([nested_text(VERY_DEEP)], [nested_text(VERY_DEEP).encode(), "1"]):
        with pytest.raises(JsonDepthError) as caught:
            mysql._columns([(1, value) for value in values], ("id", "doc"), [(1, converter)], "ds")
        assert caught.value.column == "doc"
    assert mysql._columns([(1, "not json")], ("id", "doc"), [(1, converter)], "ds")[1] == [
        "not json"
    ]


def test_oracle_json_is_bounded_and_names_the_column() -> None:
    deep: object = Decimal("1.50")
    for level in range(MAX_JSON_DEPTH):
        deep = {"a": deep} if level % 2 else [deep]
    encoded = oracle.encode_json(deep)
    assert not exceeds_json_depth(encoded)
    assert exceeds_json_depth(encoded, MAX_JSON_DEPTH - 1)
    with pytest.raises(JsonDepthError):
        oracle.encode_json([deep])
    with pytest.raises(JsonDepthError):
        oracle.encode_json(nested_value(50 * VERY_DEEP, kind=dict))
    convert = oracle._mapped(oracle.encode_json)
    with pytest.raises(JsonDepthError) as caught:
        oracle.batch_columns([(1, [deep])], [oracle._mapped(int), convert], ("ID", "DOC"))
    assert caught.value.column == "DOC"
