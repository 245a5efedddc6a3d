"""Issue 23's PostgreSQL fast path (``layout_plan`` + ``LaidOutBatch``: batches laid out in C
from the driver's tuples) against the general path, on a real server: for every type it
covers, with NULLs, unicode, control characters, extreme numerics and floats, infinities, BC
and five-digit years, time zones and JSON of every shape, the two paths write the same
document bytes and read the same rows."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from uuid import UUID

import psycopg
import pytest

from fetcher.adapters.jsonlayout.columns import LaidOutBatch
from fetcher.adapters.sql.postgres import PostgresConnector
from fetcher.engine.document import ROW_DEPTH, _rows_bytes
from fetcher.engine.model import ConnectionDescriptor
from fetcher.engine.ports import TableQuery
from fetcher.engine.types import TableSchema
from tests.integration.sql.written import both_paths, table_named

pytestmark = pytest.mark.integration

_TABLE_SQL = """
DROP TABLE IF EXISTS public.laid_out, public.laid_out_arrays;
DROP TYPE IF EXISTS public.laid_out_mood;
CREATE TYPE public.laid_out_mood AS ENUM ('ok', 'sad', 'é "q"');
CREATE TABLE public.laid_out (
    id integer, i2 smallint, i8 bigint, n numeric, n6 numeric(12, 6), m money, flag boolean,
    t text, vc varchar(40), ch char(6), nm name, x xml, e public.laid_out_mood, u uuid,
    d date, ts timestamp, tz timestamptz, b bytea, j json, jb jsonb,
    "we""ird %s key" text, "ключ" integer,
    f4 real, f8 double precision, tm time, ttz timetz, iv interval, c1 "char", o oid
);
CREATE TABLE public.laid_out_arrays (id integer, a integer[], ip inet);
INSERT INTO public.laid_out_arrays VALUES (1, '{1,2}', '10.0.0.1');
"""

_TEXTS = [
    "", "plain", 'quote " and \\ backslash', "tab\tnew\nline\rcr\bbs\fff", "\x01\x1f\x7f",
    "é ü 中文", "emoji 😀 astral 𝄞", "\u2028\u2029 separators", "<b>&amp;</b>", "  padded  ",
]  # fmt: skip
_NUMERICS = [
    "0", "-0", "1500.00", "0.000001", "-123456789012345678901234567890.123456789",
    "1e-20", "NaN", "Infinity", "-Infinity", "99999999999999999999999999999999999999",
]  # fmt: skip
_JSONS = [
    '{"b": 1, "a": [1, 2.50, {"z": null, "é": "x"}], "aa": {}, "": []}',
    '{"key": 1, "key": 2}',  # json keeps duplicates: the last one is read
    '[1e400, -0, 0.10, 12345678901234567890123]',
    '  {"\\u00e9\\/\\u001F": "\\ud83d\\ude00 \\t"}  ',
    '"just a string"', "17", "true", "null", "[]", "{}",
    '{"b": {"d": [{"f": 1, "e": 2}], "c": 3}, "a": 0}',
    '{"ascii": 1, "€": 2, "😀": 3, "\\ue000": 4}',  # UTF-16 order differs from code points
]  # fmt: skip
_MOMENTS = [
    "2024-01-02 03:04:05", "2024-01-02 03:04:05.120000", "0001-01-01 00:00:00",
    "9999-12-31 23:59:59.999999", "infinity", "-infinity", "0044-03-15 12:00:00 BC",
    "10000-01-01 00:00:00", "1900-02-28 23:59:59.5",
]  # fmt: skip
_DATES = ["2024-02-29", "infinity", "-infinity", "0044-03-15 BC", "12345-01-01", "0001-01-01"]
_FLOATS = [
    "0.1", "-0", "1e16", "1e-7", "123456789.125", "3.4028235e38", "1e308", "5e-324",
    "2.5", "-1.5e-10", "16777217",
]  # fmt: skip
_REALS = ["0.1", "-0", "1e16", "1e-7", "2.5", "3.4028235e38", "16777217", "1.17549435e-38"]
#: Each makes the C layout decline its batch (a str where floats are written).
_NON_FINITE = ["NaN", "Infinity", "-Infinity"]
_TIMES = ["00:00:00", "23:59:59.999999", "12:30:00.5", "24:00:00"]
_INTERVALS = ["1 day 02:03:04.5", "-1 mon", "P1Y2M", "0", "-3 days 00:00:01"]


def _rows(count: int, seed: int) -> Iterator[tuple[object, ...]]:
    """Rows mixing every hard value with NULLs (seeded: a failure reproduces)."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    zones = [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-11))]

    def maybe(value: object) -> object:
        return None if rng.random() < 0.15 else value

    for index in range(count):
        # the first 400 rows without json's duplicate keys, which make the C layout decline
        jsons = rng.choice(_JSONS if index >= 400 else [j for j in _JSONS if "key" not in j])
        moment = rng.choice(_MOMENTS)
        zoned = datetime(2024, 1, 2, 3, 4, 5, rng.choice([0, 120000, 999999]), rng.choice(zones))
        yield (
            index,
            maybe(rng.choice([-32768, 0, 32767])),
            maybe(rng.choice([-(2**63), 2**63 - 1, 0, 42])),
            maybe(rng.choice(_NUMERICS)),
            maybe(Decimal(rng.choice(["0.5", "-1.25", "123456.000001"]))),
            maybe(rng.choice(["1500.00", "-0.01", "0"])),
            maybe(rng.choice([True, False])),
            maybe(rng.choice(_TEXTS)),
            maybe(rng.choice(_TEXTS)[:40]),
            maybe(rng.choice(["a", "ab c", "中"])),
            maybe(rng.choice(["pg_name", "é"])),
            maybe(rng.choice(["<a>x</a>", "<b attr='&quot;'/>"])),
            maybe(rng.choice(["ok", "sad", 'é "q"'])),
            maybe(rng.choice(["A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", str(UUID(int=0))])),
            maybe(rng.choice(_DATES)),
            maybe(moment),
            maybe(rng.choice([zoned, moment + ("+00" if "infinity" not in moment else "")])),
            maybe(bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 2, 3, 80])))),
            maybe(jsons),
            maybe(jsons if "key\": 1, \"key" not in jsons and "\\u" not in jsons else '{"ok": 1}'),
            maybe(rng.choice(_TEXTS)),
            maybe(index),
            maybe(rng.choice(_REALS)),
            maybe(rng.choice(_FLOATS + (_NON_FINITE if index >= 500 else []))),
            maybe(rng.choice(_TIMES)),
            maybe(rng.choice(_TIMES) + rng.choice(["+00", "+05:30", "-11"])),
            maybe(rng.choice(_INTERVALS)),
            maybe(rng.choice(["a", "\\", "é"[:1]])),
            maybe(rng.choice([0, 1, 4294967295])),
        )  # fmt: skip


@pytest.fixture
def row_tables(pg_descriptor: ConnectionDescriptor, postgres_dsn: str) -> ConnectionDescriptor:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(_TABLE_SQL)
        marks = ", ".join(["%s"] * 29)
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO public.laid_out VALUES ({marks})",
                list(_rows(600, seed=23)),
            )
    return pg_descriptor


async def _table(pg: PostgresConnector, name: str) -> TableSchema:
    return await table_named(pg, name, ["public"])


async def test_the_fast_path_writes_the_general_paths_bytes_and_rows(
    row_tables: ConnectionDescriptor, monkeypatch: pytest.MonkeyPatch
) -> None:
    (fast, fast_rows), (general, general_rows) = await both_paths(
        lambda: PostgresConnector(row_tables, batch_size=50),
        lambda fast: monkeypatch.setattr(PostgresConnector, "laid_out", fast),
        "laid_out",
        ["public"],
    )
    # the batches with json's duplicate keys or a non-finite float decline, the rest are laid out
    assert set(fast[1]) == {"LaidOutBatch", "FastRowBatch"}
    assert "LaidOutBatch" not in general[1]
    assert fast[0] == general[0]
    assert fast_rows == general_rows
    document = json.loads(fast[0])  # the datasource object
    rows = document["laid_out"]
    assert len(rows) == 600
    assert {row["tz"] for row in rows} >= {"infinity", "2024-01-01T21:34:05.12Z"}
    assert {row["d"] for row in rows} >= {"0044-03-15 BC", "12345-01-01", "-infinity"}
    assert {row["n"] for row in rows} >= {"NaN", "-Infinity", "0.00000000000000000001"}
    assert {row["f8"] for row in rows} >= {"NaN", "Infinity", 1e16, 5e-324, -0.0}
    assert {row["f4"] for row in rows} >= {0.1, 3.4028235e38}
    assert {row["flag"] for row in rows} == {True, False, None}


async def test_the_driver_rows_are_laid_out_in_c_not_declined(
    row_tables: ConnectionDescriptor,
) -> None:
    """Every batch without a duplicate JSON key or a non-finite float goes through the C
    layout (not the general path), and its bytes are the batch's own general-path bytes."""
    async with PostgresConnector(row_tables, batch_size=50) as pg:
        table = await _table(pg, "laid_out")
        laid = declined = 0
        async for batch in pg.stream(TableQuery(table, table.columns)):
            rows = list(batch)
            if not isinstance(batch, LaidOutBatch):
                declined += 1
                assert any(
                    row["f8"] in {"NaN", "Infinity", "-Infinity"} or row["j"] == {"key": 2}
                    for row in rows
                )
                continue
            laid += 1
            native = batch.encoded_rows(ROW_DEPTH)
            assert native is not None
            assert bytes(_rows_bytes(rows)) == bytes(native)  # the rows, written in Python
    assert laid > declined > 0


async def test_uncovered_types_take_the_general_path(
    row_tables: ConnectionDescriptor,
) -> None:
    async with PostgresConnector(row_tables) as pg:
        table = await _table(pg, "laid_out_arrays")
        batches = [batch async for batch in pg.stream(TableQuery(table, table.columns))]
    assert [type(batch).__name__ for batch in batches] == ["FastRowBatch"]
    assert list(batches[0]) == [{"a": [1, 2], "id": 1, "ip": "10.0.0.1"}]
