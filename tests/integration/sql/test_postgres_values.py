"""§5.3 encoding of PostgreSQL values, streaming in batches, read-only UTC sessions."""

from __future__ import annotations

import psycopg
import pytest

from fetcher.adapters.sql.postgres import PostgresConnector
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.types import TableSchema
from fetcher.engine.values import ExactNumber

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
    assert [len(b) for b in batches] == [10, 10, 5]
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
