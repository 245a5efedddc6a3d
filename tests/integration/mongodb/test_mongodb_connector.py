"""The MongoDB connector against a server (nx-27017 here; a real MongoDB when
``FETCHER_TEST_MONGODB_URL`` is set): discovery and sampling (§11.3), projection (§3.2),
filters (§3.4), encodings (§5.3), streaming in batches, errors and cancellation."""

from __future__ import annotations

import asyncio
import json
import secrets
import struct
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from bson.binary import Binary
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from pymongo import monitoring

from fetcher.adapters.mongodb import MongoConnector
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.engine import Engine, EngineError, ErrorCategory, ExtractionRequest
from fetcher.engine.document import dumps_document
from fetcher.engine.errors import MAX_JSON_DEPTH
from fetcher.engine.filters.parse import parse_filters
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.testing import MemorySink
from fetcher.engine.types import TableSchema, TypeFamily
from tests.batches import narrow_batches
from tests.contract.engines._common import closed_port
from tests.integration.mongodb.conftest import Target

pytestmark = pytest.mark.integration

OID_A = ObjectId("65a1b2c3d4e5f60718293a4b")
OID_B = ObjectId("65a1b2c3d4e5f60718293a4c")
PEOPLE = [
    {
        "_id": OID_A,
        "name": "Ana.Silva",
        "age": 31,
        "city": "Lisbon",
        "joined": datetime(2024, 1, 2, 3, 4, 5, 120_000),
    },
    {"_id": OID_B, "name": "bob", "age": 45, "city": None, "joined": datetime(2025, 6, 1)},
    {"_id": ObjectId(), "name": "Carla", "age": None, "joined": datetime(2023, 3, 3)},
    {"_id": ObjectId(), "name": "a_b%", "age": 20, "city": "Porto", "extra": {"k": [1, "x"]}},
]


class _Commands(monitoring.CommandListener):
    """Every command the clients of this module send, with its reply."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Mapping[str, Any]]] = []
        self.replies: list[tuple[str, Mapping[str, Any]]] = []

    def started(self, event: Any) -> None:
        self.sent.append((event.command_name, event.command))

    def succeeded(self, event: Any) -> None:
        self.replies.append((event.command_name, event.reply))

    def failed(self, event: Any) -> None:
        return None


COMMANDS = _Commands()
monitoring.register(COMMANDS)


async def _extract(
    target: Target,
    tables: Mapping[str, Sequence[str]],
    filters: Mapping[str, Mapping[str, Mapping[str, list[object]]]] | None = None,
    *,
    batch_size: int = 2_000,
) -> dict[str, list[dict[str, object]]]:
    ds = target.descriptor.config_name
    mapped = {ds: {key: tuple(fields) for key, fields in tables.items()}}
    request = ExtractionRequest(
        job_id=f"it-{secrets.token_hex(4)}",
        mapped_fields=mapped,
        filters=parse_filters({ds: filters} if filters else None, mapped),
    )
    sink = MemorySink()
    await Engine(SqlConnectorRegistry(batch_size=batch_size)).run(
        request, {ds: target.descriptor}, sink
    )
    document: dict[str, dict[str, list[dict[str, object]]]] = json.loads(sink.data)
    return document[ds]


async def _people(target: Target) -> None:
    await target.db["people"].insert_many([dict(p) for p in PEOPLE])


async def _table(target: Target, name: str) -> TableSchema:
    async with MongoConnector(target.descriptor) as connector:
        found = await connector.discover([])
    return next(t for t in found.tables if t.name == name)


# --- discovery -------------------------------------------------------------------------------


async def test_discovery_lists_collections_fields_and_types(target: Target) -> None:
    await _people(target)
    await target.db.create_collection("empty")
    async with MongoConnector(target.descriptor) as connector:
        await connector.probe()
        found = await connector.discover(["ignored"])
    assert found.default_schema == ""
    tables = {t.name: t for t in found.tables}
    assert set(tables) == {"people", "empty"}
    assert [c.name for c in tables["empty"].columns] == ["_id"]
    people = {c.name: (c.family, c.native_type) for c in tables["people"].columns}
    assert people == {
        "_id": (TypeFamily.TEXT, "objectId"),
        "name": (TypeFamily.TEXT, "string"),
        "age": (TypeFamily.INTEGER, "int"),
        "city": (TypeFamily.TEXT, "string"),
        "joined": (TypeFamily.TIMESTAMPTZ, "date"),
        "extra": (TypeFamily.JSON, "object"),
    }


async def test_system_collections_and_views(target: Target) -> None:
    if not target.real:
        pytest.skip("nx-27017 can hold neither dotted collection names nor views")
    await _people(target)
    await target.db["system.js"].insert_one({"_id": "fn", "value": "x"})
    await target.db.command(
        "create", "adults", viewOn="people", pipeline=[{"$match": {"age": {"$gte": 30}}}]
    )
    async with MongoConnector(target.descriptor) as connector:
        found = await connector.discover([])
    assert {t.name for t in found.tables} == {"people", "adults"}


async def test_sampling_uses_sample_sized_by_the_collection(target: Target) -> None:
    await target.db["many"].insert_many([{"i": i, "s": "x"} for i in range(1_500)])
    await target.db["few"].insert_many([{"i": i} for i in range(10)])
    COMMANDS.sent.clear()
    table = await _table(target, "many")
    assert [c.name for c in table.columns] == ["_id", "i", "s"]
    samples = [cmd["pipeline"] for name, cmd in COMMANDS.sent if name == "aggregate"]
    assert [{"$sample": {"size": 1_000}}] in samples
    finds = [cmd for name, cmd in COMMANDS.sent if name == "find"]
    assert {cmd["find"] for cmd in finds} >= {"few"}  # ≤ 1,000 documents: all of them
    assert all(cmd.get("limit") == 1_000 for cmd in finds)


async def test_named_discovery_samples_only_the_named_collections(target: Target) -> None:
    """``discover_tables`` (the planner's fast path) lists every collection but samples only
    the named ones (exact names, §3.3): the result is whole discovery cut to those names."""
    await _people(target)
    await target.db["many"].insert_many([{"i": i} for i in range(50)])
    await target.db["People"].insert_one({"x": 1})
    async with MongoConnector(target.descriptor) as connector:
        whole = await connector.discover([])
        COMMANDS.sent.clear()
        named = await connector.discover_tables([], ["people", "nope"])
    assert named.tables == tuple(t for t in whole.tables if t.name == "people")
    sampled = {cmd.get("find") or cmd.get("aggregate") for name, cmd in COMMANDS.sent}
    assert sampled - {None, 1} == {"people"}


# --- projection (§3.2) ---------------------------------------------------------------------


async def test_named_fields_give_exactly_those_keys_without_id(target: Target) -> None:
    await _people(target)
    rows = (await _extract(target, {"people": ["name", "city"]}))["people"]
    assert rows == [
        {"name": "Ana.Silva", "city": "Lisbon"},
        {"name": "bob", "city": None},
        {"name": "Carla", "city": None},  # missing → null
        {"name": "a_b%", "city": "Porto"},
    ]


async def test_id_only_when_requested(target: Target) -> None:
    await _people(target)
    rows = (await _extract(target, {"people": ["_id", "age"]}))["people"]
    assert rows[0] == {"_id": str(OID_A), "age": 31}
    assert all(set(row) == {"_id", "age"} for row in rows)


async def test_wildcard_gives_each_documents_own_keys(target: Target) -> None:
    await _people(target)
    rows = (await _extract(target, {"people": ["*"]}))["people"]
    assert [sorted(row) for row in rows] == [sorted(p) for p in PEOPLE]
    assert rows[3]["extra"] == {"k": [1, "x"]}


@pytest.mark.parametrize("field", ["$where", "a.b"])
async def test_unaddressable_fields_fail_the_job(target: Target, field: str) -> None:
    await target.db["odd"].insert_one({"a": 1})
    with pytest.raises(EngineError) as caught:
        await _extract(target, {"odd": [field]})
    assert caught.value.category is ErrorCategory.VALIDATION
    assert f"field '{field}' is not addressable on MongoDB" in str(caught.value)
    assert "unknown fields" not in str(caught.value)


# --- filters (§3.4) ------------------------------------------------------------------------


FILTER_CASES: list[tuple[str, dict[str, list[object]], set[str]]] = [
    ("age", {"eq": [31]}, {"Ana.Silva"}),
    ("age", {"eq": ["45", 20]}, {"bob", "a_b%"}),
    ("age", {"eq": [None]}, {"Carla"}),
    ("city", {"eq": [None]}, {"bob", "Carla"}),  # null or missing
    ("city", {"eq": ["Porto", None]}, {"bob", "Carla", "a_b%"}),
    ("city", {"ne": ["Porto"]}, {"Ana.Silva"}),  # never null or missing
    ("city", {"ne": [None]}, {"Ana.Silva", "a_b%"}),
    ("city", {"nin": ["Lisbon", None]}, {"a_b%"}),
    ("city", {"in": ["Lisbon", "Porto"]}, {"Ana.Silva", "a_b%"}),
    ("age", {"gt": [31]}, {"bob"}),
    ("age", {"gte": [31]}, {"Ana.Silva", "bob"}),
    ("age", {"lt": [31]}, {"a_b%"}),
    ("age", {"lte": ["31"]}, {"Ana.Silva", "a_b%"}),
    ("age", {"between": [20, 31]}, {"Ana.Silva", "a_b%"}),
    ("age", {"gt": ["30.5"]}, {"Ana.Silva", "bob"}),
    ("name", {"like": ["ana%"]}, {"Ana.Silva"}),  # case-insensitive
    ("name", {"like": ["%.s%"]}, {"Ana.Silva"}),  # "." is a literal, not "any"
    ("name", {"like": ["a\\_b\\%"]}, {"a_b%"}),
    ("name", {"like": ["a_b%"]}, {"a_b%"}),
    ("name", {"like": ["%"]}, {"Ana.Silva", "bob", "Carla", "a_b%"}),
    ("name", {"eq": ["ana.silva"]}, set()),  # eq is exact
    ("_id", {"eq": [str(OID_A).upper()]}, {"Ana.Silva"}),  # 24-hex → ObjectId
    ("_id", {"in": [str(OID_A), str(OID_B)]}, {"Ana.Silva", "bob"}),
    ("joined", {"gte": ["2024-01-02T03:04:05.12Z"]}, {"Ana.Silva", "bob"}),
    ("joined", {"between": ["2023-01-01", "2024-01-02"]}, {"Ana.Silva", "Carla"}),  # end of day
    ("joined", {"lt": ["2024-01-02T05:04:06+02:00"]}, {"Carla", "Ana.Silva"}),  # offset → UTC
    ("joined", {"lt": ["2024-01-02T05:04:05+02:00"]}, {"Carla"}),
    ("joined", {"eq": [None]}, {"a_b%"}),
]


@pytest.mark.parametrize(("field", "ops", "names"), FILTER_CASES)
async def test_filter_operators_match_sql_semantics(
    target: Target, field: str, ops: dict[str, list[object]], names: set[str]
) -> None:
    await _people(target)
    rows = (await _extract(target, {"people": ["name"]}, {"people": {field: ops}}))["people"]
    assert {row["name"] for row in rows} == names


async def test_filters_on_several_fields_are_anded(target: Target) -> None:
    await _people(target)
    filters: dict[str, dict[str, dict[str, list[object]]]] = {
        "people": {"age": {"gte": [20]}, "city": {"ne": ["Lisbon"]}}
    }
    rows = (await _extract(target, {"people": ["name"]}, filters))["people"]
    assert rows == [{"name": "a_b%"}]  # bob's null city never matches ``ne``


# --- encodings (§5.3) ----------------------------------------------------------------------


async def test_values_encode_per_5_3(target: Target) -> None:
    doc = {
        "_id": OID_A,
        "i": 7,
        "big": Int64(9_007_199_254_740_993),
        "f": 0.1,
        "whole": 2.0,
        "t": True,
        "s": "ünï 😀",
        "at": datetime(2026, 1, 2, 3, 4, 5, 120_000),
        "at_utc": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "bin": Binary(b"\x00\x01\xff", 0),
        "nested": {"b": [1, {"c": None}], "a": OID_B},
        "n": None,
    }
    await target.db["vals"].insert_one(doc)
    [row] = (await _extract(target, {"vals": ["*"]}))["vals"]
    assert row == {
        "_id": "65a1b2c3d4e5f60718293a4b",
        "i": 7,
        "big": 9_007_199_254_740_993,
        "f": 0.1,
        "whole": 2.0,
        "t": True,
        "s": "ünï 😀",
        "at": "2026-01-02T03:04:05.12Z",
        "at_utc": "2026-01-02T03:04:05Z",
        "bin": "AAH/",
        "nested": {"a": "65a1b2c3d4e5f60718293a4c", "b": [1, {"c": None}]},
        "n": None,
    }
    assert isinstance(row["whole"], float)


# --- documents nested deeper than MAX_JSON_DEPTH (issue 12, hardening) -----------------------


def _nested_bson(identifier: int, depth: int) -> RawBSONDocument:
    """``{"_id": identifier, "doc": {"a": {"a": … 1}}}`` with ``depth`` documents under
    ``doc``, encoded without recursion (pymongo's own encoder recurses) and inserted as is."""
    element = b"\x10a\x00" + struct.pack("<i", 1)
    for _ in range(depth):
        element = b"\x03a\x00" + struct.pack("<i", len(element) + 5) + element + b"\x00"
    body = b"\x10_id\x00" + struct.pack("<i", identifier) + b"\x03doc" + element[2:]
    return RawBSONDocument(struct.pack("<i", len(body) + 5) + body + b"\x00")


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 400])
async def test_documents_nested_too_deep_fail_with_the_query_text(
    target: Target, depth: int
) -> None:
    """A field nested past the bound (251: refused by the writer; 400: the converter's
    recursion runs out and the batch is measured) fails the job with the §4.5 query text
    naming the field and the collection, never ``internal error``. A real ``mongod`` refuses to
    store such documents (100 levels), so only a wire server that stores them is tried."""
    if target.real:
        pytest.skip("a real mongod stores at most 100 levels of nesting")
    await target.db["deep"].insert_many([{"_id": 0, "doc": {"x": 1}}, _nested_bson(1, depth)])
    ds = target.descriptor.config_name
    with pytest.raises(EngineError) as caught:
        await _extract(target, {"deep": ["_id", "doc"]})
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.text() == (
        f"failed to query datasource '{ds}': column 'doc' of table 'deep' holds a JSON value "
        f"nested deeper than {MAX_JSON_DEPTH} levels"
    )


async def test_documents_nested_at_the_bound_are_extracted_byte_for_byte(target: Target) -> None:
    if target.real:
        pytest.skip("a real mongod stores at most 100 levels of nesting")
    await target.db["deep"].insert_many([_nested_bson(1, MAX_JSON_DEPTH)])
    ds = target.descriptor.config_name
    request = ExtractionRequest(job_id="deep", mapped_fields={ds: {"deep": ("_id", "doc")}})
    sink = MemorySink()
    await Engine(SqlConnectorRegistry()).run(request, {ds: target.descriptor}, sink)
    rows: list[Row] = [{"_id": 1, "doc": _nested(MAX_JSON_DEPTH)}]
    assert sink.data == dumps_document({ds: {"deep": rows}})


# --- streaming, errors, cancellation -------------------------------------------------------


async def test_stream_yields_batches_through_the_cursor(target: Target) -> None:
    await target.db["seq"].insert_many([{"_id": i} for i in range(10)])
    table = await _table(target, "seq")
    COMMANDS.sent.clear()
    async with MongoConnector(target.descriptor, batch_size=3) as connector:
        sizes = [len(b) async for b in connector.stream(TableQuery(table, table.columns))]
    assert sizes == narrow_batches(10, 3)
    finds = [cmd for name, cmd in COMMANDS.sent if name == "find" and cmd["find"] == "seq"]
    assert [cmd.get("batchSize") for cmd in finds] == [3]
    assert [name for name, _ in COMMANDS.sent].count("getMore") >= 3


async def test_unreachable_server_is_a_redacted_connect_failure(target: Target) -> None:
    descriptor = replace(
        target.descriptor, port=closed_port(), username="reader", password="S3cret-Pa55word"
    )
    with pytest.raises(EngineError) as caught:
        async with MongoConnector(descriptor):
            pass
    exc = caught.value
    assert exc.category is ErrorCategory.CONNECT
    assert exc.message == "failed to connect to datasource 'mongo_it'"
    assert exc.detail
    assert all("S3cret-Pa55word" not in text for text in (str(exc), repr(exc), exc.detail))


async def test_wrong_password_is_a_connect_failure(target: Target) -> None:
    if not target.real:
        pytest.skip("nx-27017 has no authentication")
    wrong = replace(target.descriptor, password="Wrong-Pa55word")
    with pytest.raises(EngineError) as caught:
        async with MongoConnector(wrong):
            pass
    assert caught.value.category is ErrorCategory.CONNECT
    assert "Wrong-Pa55word" not in (caught.value.detail or "")


async def test_cancellation_mid_stream_closes_the_client(target: Target) -> None:
    await target.db["bulk"].insert_many([{"_id": i, "pad": "x" * 100} for i in range(3_000)])
    table = await _table(target, "bulk")
    first = asyncio.Event()
    opened: list[MongoConnector] = []

    async def consume() -> None:
        async with MongoConnector(target.descriptor, batch_size=100) as connector:
            opened.append(connector)
            async for _ in connector.stream(TableQuery(table, table.columns)):
                first.set()
                await asyncio.sleep(0.05)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert opened[0]._client is None  # closed by __aexit__
    with pytest.raises(EngineError):
        async for _ in opened[0].stream(TableQuery(table, table.columns)):
            pass
    async with MongoConnector(target.descriptor) as again:
        count = sum([len(b) async for b in again.stream(TableQuery(table, table.columns[:1]))])
    assert count == 3_000
