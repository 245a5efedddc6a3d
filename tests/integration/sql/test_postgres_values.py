"""§5.3 encoding of PostgreSQL values, streaming in batches, read-only UTC sessions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Iterator

import psycopg
import pytest
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.pq import Format

from fetcher.adapters.batch_sizing import FIRST_BATCH_ROWS
from fetcher.adapters.jsonlayout.encoder_process import BatchEncoder
from fetcher.adapters.sql.postgres import PostgresConnector
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.engine import Engine
from fetcher.engine.document import dumps_document
from fetcher.engine.errors import MAX_JSON_DEPTH, EngineError, ErrorCategory
from fetcher.engine.model import ConnectionDescriptor, ExtractionRequest
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.testing import MemorySink
from fetcher.engine.types import TableSchema
from fetcher.engine.values import ExactNumber, parse_json_exact_fractions
from tests.batches import narrow_batches
from tests.integration.sql.written import document_bytes

pytestmark = pytest.mark.integration

EXPECTED: dict[str, object] = {
    "id": 1,
    "n": "1500.00",
    "n_nan": "NaN",
    "n_inf": "Infinity",
    "n_scale": "0.500000",
    "tz": "2024-01-02T10:04:05.12Z",  # inserted as New York time
    "ts": "2024-01-02T03:04:05Z",
    "ts_inf": "infinity",
    "d": "2024-02-29",
    "d_inf": "infinity",
    "d_minf": "-infinity",
    "d_bc": "0044-03-15 BC",
    "b": "AP8Q",
    "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    "ia": [1, None, 3],
    "ta": ["a b", "c", None],
    "na": ["1.50", "NaN"],
    "ea": ["ok", "sad"],
    "nul": None,
    "r": 0.1,
    "f8": 0.1,
    "f8_nan": "NaN",
    "iv": "P1Y2M3DT4H5M6.5S",
    "iv_neg": "-P1D",
    "iv_mixed": "P1M-1D",
    "m": "1500.00",
    "t": "04:05:06.5",
    "ttz": "04:05:06+05:30",
    "e": "sad",
    "flag": True,
    "big": 9007199254740993,
    "ip": "10.0.0.1",
}


async def table_named(pg: PostgresConnector, name: str) -> TableSchema:
    found = await pg.discover(["public"])
    return next(t for t in found.tables if t.name == name)


async def typed_row(pg: PostgresConnector) -> Row:
    typed = await table_named(pg, "typed")
    rows = [row async for batch in pg.stream(TableQuery(typed, typed.columns)) for row in batch]
    assert len(rows) == 1
    return rows[0]


async def test_scalar_and_array_encodings(pg: PostgresConnector) -> None:
    row = await typed_row(pg)
    for key, value in EXPECTED.items():
        assert row[key] == value, key
        assert type(row[key]) is type(value), key


async def test_real_is_float32_shortest(pg: PostgresConnector) -> None:
    row = await typed_row(pg)
    assert repr(row["r"]) == "0.1"


async def test_jsonb_is_parsed_with_exact_numbers(pg: PostgresConnector) -> None:
    row = await typed_row(pg)
    j = row["j"]
    assert isinstance(j, dict)
    assert j["b"] == [1, 2]
    assert j["c"] == {"d": None}
    assert isinstance(j["a"], ExactNumber)
    assert j["a"].text == "1.50"


async def test_json_keeps_number_text(pg: PostgresConnector) -> None:
    row = await typed_row(pg)
    js = row["js"]
    assert isinstance(js, dict)
    assert isinstance(js["x"], ExactNumber)
    assert js["x"].text == "1.0e2"
    (inner,) = js["y"]
    assert isinstance(inner, ExactNumber)
    assert inner.text == "1.10"


async def test_money_column_in_a_filtered_table(pg: PostgresConnector) -> None:
    people = await table_named(pg, "people")
    fee = people.column_named("fee")
    id_column = people.column_named("id")
    assert fee is not None
    assert id_column is not None
    rows = [row async for b in pg.stream(TableQuery(people, (id_column, fee))) for row in b]
    by_id = {row["id"]: row["fee"] for row in rows}
    assert by_id[3] == "30.00"
    assert by_id[21] is None


async def test_streams_in_batches(pg_descriptor: object) -> None:
    from fetcher.engine.model import ConnectionDescriptor

    assert isinstance(pg_descriptor, ConnectionDescriptor)
    async with PostgresConnector(pg_descriptor, batch_size=10) as pg:
        numbers = await table_named(pg, "numbers")
        batches = [list(b) async for b in pg.stream(TableQuery(numbers, numbers.columns))]
    assert [len(b) for b in batches] == narrow_batches(25, 10)
    assert sorted(int(str(row["n"])) for b in batches for row in b) == list(range(1, 26))


async def test_session_is_read_only_and_utc(pg: PostgresConnector) -> None:
    conn = pg._conn  # the private handle: the port itself offers no way to write
    assert conn is not None
    cursor = await conn.execute("SHOW TimeZone")
    assert await cursor.fetchone() == ("UTC",)
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        await conn.execute("INSERT INTO public.numbers VALUES (99)")


async def test_query_failure_is_unavailable(pg: PostgresConnector) -> None:
    numbers = await table_named(pg, "numbers")
    missing = TableSchema("public", "no_such_table", numbers.columns)
    with pytest.raises(EngineError) as caught:
        async for _ in pg.stream(TableQuery(missing, missing.columns)):
            pass
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.message == "failed to query datasource 'pg'"
    assert caught.value.detail is not None
    assert "no_such_table" in caught.value.detail
    await pg.probe()  # the connection is still usable


MOMENTS: dict[int, dict[str, object]] = {
    1: {
        "tz": "2024-01-02T03:04:05.123456Z",
        "ts": "2024-01-02T03:04:05.1Z",
        "d": "2024-02-29",
        "tza": ["2024-01-02T03:04:05.5Z", "infinity", "0044-03-15 10:00:00+00 BC", None],
        "tsa": ["2024-01-02T03:04:05Z", "-infinity", "12345-01-01 00:00:00"],
        "note": 'a "quoted" note',
    },
    2: {
        "tz": "2024-01-02T03:04:05.000001Z",
        "ts": "0001-01-01T00:00:00Z",
        "d": "0999-12-31",
        "tza": [],
        "tsa": [],
        "note": None,
    },
    3: {"tz": "infinity", "ts": "12345-06-07 08:09:10.11", "d": "10000-01-01", "note": "None"},
    4: {"tz": "-infinity", "ts": "0044-03-15 10:00:00.25 BC", "d": "0044-03-15 BC", "note": ""},
    5: {"tz": "0044-03-15 10:00:00+00 BC", "ts": "infinity", "d": "infinity", "note": "tab\there"},
    6: {"tz": "10000-01-01 00:00:00+00", "ts": "9999-12-31T23:59:59.999999Z", "d": "-infinity"},
    7: {"tz": None, "ts": None, "d": None, "note": None},
    8: {"tz": "1900-01-01T00:00:00.1Z", "ts": "1970-01-01T00:00:00Z", "d": "1970-01-01"},
}


@pytest.mark.parametrize("batch_size", [1, 3, 100])
async def test_timestamps_and_dates(pg_descriptor: object, batch_size: int) -> None:
    """§5.3 date and timestamp rows, whatever mix of shapes a batch holds."""
    from fetcher.engine.model import ConnectionDescriptor

    assert isinstance(pg_descriptor, ConnectionDescriptor)
    async with PostgresConnector(pg_descriptor, batch_size=batch_size) as pg:
        moments = await table_named(pg, "moments")
        query = TableQuery(moments, moments.columns)
        rows = {row["id"]: row async for batch in pg.stream(query) for row in batch}
    assert set(rows) == set(MOMENTS)
    for key, expected in MOMENTS.items():
        for name, value in expected.items():
            assert rows[key][name] == value, (key, name)


async def test_batches_are_row_batches(pg: PostgresConnector) -> None:
    from fetcher.engine.document import RowBatch

    moments = await table_named(pg, "moments")
    batches = [b async for b in pg.stream(TableQuery(moments, moments.columns))]
    assert all(isinstance(b, RowBatch) for b in batches)
    first = batches[0]
    assert isinstance(first, RowBatch)
    assert first.names == tuple(c.name for c in moments.columns)
    assert [dict(row) for row in batches[0]] == list(batches[0])


class _StrictOnMarker(Loader):
    """Stands in for the C text loader meeting bytes that are not UTF-8."""

    format = Format.TEXT

    def load(self, data: Buffer) -> object:
        text = bytes(data).decode()
        if text == "None":
            raise UnicodeDecodeError("utf-8", bytes(data), 0, 1, "simulated damaged text")
        return text


async def test_a_batch_that_fails_to_decode_is_loaded_tolerantly(pg: PostgresConnector) -> None:
    conn = pg._conn  # the private handle: a strict loader that fails on one value
    assert conn is not None
    conn.adapters.register_loader("text", _StrictOnMarker)
    moments = await table_named(pg, "moments")
    rows = [row async for b in pg.stream(TableQuery(moments, moments.columns)) for row in b]
    by_id = {row["id"]: row for row in rows}
    assert len(rows) == len(MOMENTS)
    assert by_id[3]["note"] == "None"
    assert by_id[1]["note"] == 'a "quoted" note'
    assert by_id[1]["tza"] == MOMENTS[1]["tza"]
    assert by_id[3]["tz"] == "infinity"


_DOCS_SQL = """
DROP TABLE IF EXISTS public.encoded_docs;
CREATE TABLE public.encoded_docs AS
SELECT n AS id,
       jsonb_build_object('n', n, 'amount', n * 1.25, 'tags', jsonb_build_array('a', n % 3)) AS j,
       ('{"x": ' || n || '.0e1, "z": -0, "s": "é\\"' || n || '"}')::json AS js,
       CASE WHEN n % 4 = 0 THEN NULL ELSE 'note ' || n END AS note
FROM generate_series(1, 25) AS n;
"""


async def _stream_bytes(
    descriptor: object, table: str, encoder: BatchEncoder | None
) -> tuple[bytes, list[str]]:
    """The §5.4 bytes of ``table`` streamed in batches of 10, and the batches' kinds."""
    assert isinstance(descriptor, ConnectionDescriptor)
    async with PostgresConnector(descriptor, batch_size=10, encoder=encoder) as pg:
        return await document_bytes(pg, await table_named(pg, table))


async def test_batches_encoded_in_the_encoder_process_are_the_same_bytes(
    pg_descriptor: object, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Embedded mode's batch encoder (issue 12): the child parses the JSON columns and writes
    each batch's bytes; the document is byte for byte the in-process one. (The general path:
    the row-text fast path, issue 23, needs no encoder.)"""
    monkeypatch.setattr(PostgresConnector, "laid_out", False)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(_DOCS_SQL)
    with BatchEncoder() as encoder:  # the connector starts it (start_soon) when it streams
        await _stream_bytes(pg_descriptor, "encoded_docs", encoder)  # encoded here meanwhile
        await asyncio.to_thread(encoder.start)  # returns once the child is up
        docs, docs_kinds = await _stream_bytes(pg_descriptor, "encoded_docs", encoder)
        assert docs_kinds == ["PreEncodedBatch"] * len(narrow_batches(25, 10))
        assert docs == (await _stream_bytes(pg_descriptor, "encoded_docs", None))[0]
        assert b'"z": -0' in docs  # json keeps its text
        for table in ("typed", "moments"):  # values orjson declines: encoded here, same bytes
            child, _ = await _stream_bytes(pg_descriptor, table, encoder)
            assert child == (await _stream_bytes(pg_descriptor, table, None))[0], table
        assert isinstance(pg_descriptor, ConnectionDescriptor)
        async with PostgresConnector(pg_descriptor, batch_size=10, encoder=encoder) as pg:
            docs_table = await table_named(pg, "encoded_docs")
            query = TableQuery(docs_table, docs_table.columns)
            stream = pg.stream(query)
            assert isinstance(stream, AsyncGenerator)
            assert len(await anext(stream)) == FIRST_BATCH_ROWS
            await stream.aclose()  # a job stopped after one batch (one more was in the child)
            again = [row async for batch in pg.stream(query) for row in batch]
    assert [row["id"] for row in again] == list(range(1, 26))


# --- JSON nested deeper than MAX_JSON_DEPTH (issue 12, hardening) -----------------------------

_PAST, _HALF = MAX_JSON_DEPTH + 1, MAX_JSON_DEPTH // 2  # jsonb: 251 levels; 250 levels
_DEEP_SQL = f"""
DROP TABLE IF EXISTS public.deep_jsonb, public.deep_json, public.past_bound, public.at_bound;
CREATE TABLE public.deep_jsonb (id integer, doc jsonb);
INSERT INTO public.deep_jsonb VALUES
    (1, '{{"a": 1}}'), (2, (repeat('[', 3000) || repeat(']', 3000))::jsonb), (3, NULL);
CREATE TABLE public.deep_json (id integer, js json);
INSERT INTO public.deep_json
VALUES (1, (repeat('{{"k": ', 3000) || '1' || repeat('}}', 3000))::json);
CREATE TABLE public.past_bound (id integer, doc jsonb);
INSERT INTO public.past_bound
VALUES (1, (repeat('[', {_PAST}) || '1.50' || repeat(']', {_PAST}))::jsonb);
CREATE TABLE public.at_bound (id integer, doc jsonb, js json);
INSERT INTO public.at_bound
SELECT n,
       (repeat('{{"a": [', {_HALF}) || n || '.50' || repeat(']}}', {_HALF}))::jsonb,
       (repeat('[', {MAX_JSON_DEPTH}) || '1.0e2' || repeat(']', {MAX_JSON_DEPTH}))::json
FROM generate_series(1, 25) AS n;
"""


@pytest.fixture(scope="module")
def deep_tables(pg_descriptor: ConnectionDescriptor, postgres_dsn: str) -> ConnectionDescriptor:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(_DEEP_SQL)
    return pg_descriptor


@pytest.fixture(scope="module")
def batch_encoder() -> Iterator[BatchEncoder]:
    with BatchEncoder() as encoder:
        encoder.start()  # up before the first batch, so every batch goes to the child
        yield encoder


async def _run_job(
    descriptor: ConnectionDescriptor, table: str, encoder: BatchEncoder | None
) -> bytes:
    """One job of ``table``'s every column through the engine and the real connector
    registry (with or without the encoder process); the document's bytes."""
    async with PostgresConnector(descriptor) as pg:
        columns = tuple(c.name for c in (await table_named(pg, table)).columns)
    request = ExtractionRequest(job_id="deep", mapped_fields={"pg": {table: columns}})
    sink = MemorySink()
    engine = Engine(SqlConnectorRegistry(batch_size=10, encoder=encoder))
    await engine.run(request, {"pg": descriptor}, sink)
    return sink.data


@pytest.mark.parametrize("encoder_on", [False, True], ids=["in-process", "encoder-process"])
@pytest.mark.parametrize(
    ("table", "column"),
    [("deep_jsonb", "doc"), ("deep_json", "js"), ("past_bound", "doc")],
    ids=["jsonb-3000", "json-3000", "jsonb-251"],
)
async def test_json_nested_too_deep_fails_with_the_query_text(
    deep_tables: ConnectionDescriptor,
    batch_encoder: BatchEncoder,
    encoder_on: bool,
    table: str,
    column: str,
) -> None:
    """3,000 levels (the scanner cannot descend them: the connector reports it) and 251 (the
    writer refuses it: the runner reports it) give the same §4.5 text, never ``internal
    error``, with the encoder process on or off."""
    with pytest.raises(EngineError) as caught:
        await _run_job(deep_tables, table, batch_encoder if encoder_on else None)
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.text() == (
        f"failed to query datasource 'pg': column '{column}' of table 'public.{table}' "
        f"holds a JSON value nested deeper than {MAX_JSON_DEPTH} levels"
    )
    async with PostgresConnector(deep_tables) as pg:
        await pg.probe()  # the server and the connection are fine afterwards


async def test_json_nested_at_the_bound_is_extracted_byte_for_byte(
    deep_tables: ConnectionDescriptor,
    batch_encoder: BatchEncoder,
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with psycopg.connect(postgres_dsn) as conn:
        texts = conn.execute("SELECT id, doc::text, js::text FROM public.at_bound").fetchall()
    rows: list[Row] = [
        {"doc": parse_json_exact_fractions(doc), "id": id_, "js": parse_json_exact_fractions(js)}
        for id_, doc, js in texts
    ]
    reference = dumps_document({"pg": {"at_bound": rows}})
    row_texts = await _run_job(deep_tables, "at_bound", None)  # issue 23's fast path
    monkeypatch.setattr(PostgresConnector, "laid_out", False)
    in_process = await _run_job(deep_tables, "at_bound", None)
    in_child = await _run_job(deep_tables, "at_bound", batch_encoder)
    assert row_texts == in_process == in_child == reference
    _, kinds = await _stream_bytes(deep_tables, "at_bound", batch_encoder)
    assert kinds == ["PreEncodedBatch"] * len(narrow_batches(25, 10))  # the child wrote them
    document = json.loads(in_process)
    assert document["pg"]["at_bound"][0]["js"] == json.loads(texts[0][2])
    assert b"1.0e2" in in_process  # the json column keeps its number text
