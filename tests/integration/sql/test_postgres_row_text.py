"""Issue 23's PostgreSQL fast path (``row_text_sql`` + ``RowTextBatch``) against the general
path, on a real server: for every type family it covers, with NULLs, unicode, control
characters, extreme numerics, infinities, BC and five-digit years, time zones and JSON of every
shape, the two paths write the same document bytes and read the same rows."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from uuid import UUID

import psycopg
import pytest

from fetcher.adapters.json_layout import layout_rows
from fetcher.adapters.row_text import RowTextBatch
from fetcher.adapters.sql.postgres import PostgresConnector, row_text_sql
from fetcher.engine.document import ROW_DEPTH, _rows_bytes
from fetcher.engine.model import ConnectionDescriptor
from fetcher.engine.ports import TableQuery
from fetcher.engine.types import TableSchema
from tests.integration.sql.written import both_paths, table_named

pytestmark = pytest.mark.integration

_TABLE_SQL = """
DROP TABLE IF EXISTS public.row_texts, public.row_texts_float;
DROP TYPE IF EXISTS public.row_text_mood;
CREATE TYPE public.row_text_mood AS ENUM ('ok', 'sad', 'é "q"');
CREATE TABLE public.row_texts (
    id integer, i2 smallint, i8 bigint, n numeric, n6 numeric(12, 6), m money, flag boolean,
    t text, vc varchar(40), ch char(6), nm name, x xml, e public.row_text_mood, u uuid,
    d date, ts timestamp, tz timestamptz, b bytea, j json, jb jsonb,
    "we""ird %s key" text, "ключ" integer
);
CREATE TABLE public.row_texts_float (id integer, f double precision);
INSERT INTO public.row_texts_float VALUES (1, 0.1);
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
        )  # fmt: skip


@pytest.fixture
def row_tables(pg_descriptor: ConnectionDescriptor, postgres_dsn: str) -> ConnectionDescriptor:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(_TABLE_SQL)
        marks = ", ".join(["%s"] * 22)
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO public.row_texts VALUES ({marks})",
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
        lambda fast: monkeypatch.setattr(PostgresConnector, "row_text", fast),
        "row_texts",
        ["public"],
    )
    assert set(fast[1]) == {"RowTextBatch"}
    assert "RowTextBatch" not in general[1]
    assert fast[0] == general[0]
    assert fast_rows == general_rows
    document = json.loads(fast[0])  # the datasource object
    rows = document["row_texts"]
    assert len(rows) == 600
    assert {row["tz"] for row in rows} >= {"infinity", "2024-01-01T21:34:05.12Z"}
    assert {row["d"] for row in rows} >= {"0044-03-15 BC", "12345-01-01", "-infinity"}
    assert {row["n"] for row in rows} >= {"NaN", "-Infinity", "0.00000000000000000001"}


async def test_the_server_texts_are_laid_out_in_c_not_declined(
    row_tables: ConnectionDescriptor,
) -> None:
    """Every batch without a duplicate JSON key or a lone escape goes through the C layout
    (not the parse fallback), and its bytes are the batch's own fallback bytes."""
    async with PostgresConnector(row_tables, batch_size=50) as pg:
        table = await _table(pg, "row_texts")
        laid = declined = 0
        async for batch in pg.stream(TableQuery(table, table.columns)):
            assert isinstance(batch, RowTextBatch)
            texts = batch.texts
            native = layout_rows(
                texts, ROW_DEPTH, max_depth=251, timestamps=["ts"], zoned_timestamps=["tz"]
            )
            if native is None:
                declined += 1
                assert any('"key": 1, "key"' in str(text) for text in texts)
                continue
            laid += 1
            reparsed = RowTextBatch(
                batch.names,
                texts,
                json_columns=sorted(batch.json_columns),
                canonical_ints=False,
                timestamps=["ts"],
                zoned_timestamps=["tz"],
            )
            _ = reparsed.columns  # parsed: the Python paths below, not the C layout
            assert bytes(_rows_bytes(reparsed)) == native
    assert laid > declined > 0


async def test_uncovered_families_take_the_general_path(
    row_tables: ConnectionDescriptor,
) -> None:
    async with PostgresConnector(row_tables) as pg:
        table = await _table(pg, "row_texts_float")
        assert row_text_sql(TableQuery(table, table.columns)) is None
        batches = [batch async for batch in pg.stream(TableQuery(table, table.columns))]
    assert [type(batch).__name__ for batch in batches] == ["FastRowBatch"]
    assert list(batches[0]) == [{"f": 0.1, "id": 1}]
