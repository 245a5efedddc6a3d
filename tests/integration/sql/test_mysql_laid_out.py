"""Issue 23's MySQL fast path (batches laid out in C from the driver's rows,
``jsonlayout.columns``) against the general path on a real MariaDB: for every family it covers,
with NULLs, unicode, control characters, extreme numerics, zero dates, long and negative
times, binary strings, and JSON of every shape (also text a ``json_valid`` check would refuse,
stored while checks were off), the two paths write the same document bytes and read the same
rows."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import pytest

from fetcher.adapters.jsonlayout.columns import LaidOutBatch
from fetcher.adapters.sql.mysql import MysqlConnector
from fetcher.engine.document import ROW_DEPTH
from fetcher.engine.model import ConnectionDescriptor
from fetcher.engine.ports import TableQuery
from fetcher.engine.types import TableSchema
from tests.contract.engines.mariadb import admin_connect, fresh_database, quote, reader_descriptor
from tests.integration.sql.written import Written, both_paths, table_named

pytestmark = pytest.mark.integration

_TABLE_SQL = (
    "SET SESSION sql_mode = ''",  # zero dates, zero months and days are stored only so
    """CREATE TABLE laid (
        id INT PRIMARY KEY, flag TINYINT(1), y YEAR, bits BIT(12), e ENUM('ok', 'é "q"'),
        s SET('a', 'b'), n DECIMAL(65, 30), n0 DECIMAL(10, 0), big BIGINT UNSIGNED,
        neg BIGINT, t TIME(6), t0 TIME, dt DATETIME(6), dt0 DATETIME, dt3 DATETIME(3),
        ts TIMESTAMP(6) NULL DEFAULT NULL, day DATE, bin BINARY(4), vb VARBINARY(100),
        bl BLOB, doc JSON, txt LONGTEXT, l1 VARCHAR(40) CHARACTER SET latin1,
        ch CHAR(5), u UUID, ip INET6, `we``ird %s key` TEXT, `ключ` INT, fl FLOAT, db DOUBLE
    )""",
    "CREATE TABLE laid_point (id INT, pt POINT)",
    "INSERT INTO laid_point VALUES (1, POINT(1, 2))",
)
_COLUMNS = 30

_TEXTS = [
    "", "plain", 'quote " and \\ backslash', "tab\tnew\nline\rcr\bbs\fff", "\x01\x1f\x7f",
    "é ü 中文", "emoji 😀 astral 𝄞", "\u2028\u2029 separators", "  padded  ", "%s %% ?",
]  # fmt: skip
_DECIMALS = [
    "0", "-0.000000000000000000000000000001", "12345678901234567890123456789012345.5",
    "-99999999999999999999999999999999999.999999999999999999999999999999", "1500",
]  # fmt: skip
_JSONS = [
    '{"b": 1, "a": [1, 2.50, {"z": null, "é": "x"}], "aa": {}, "": []}',
    "[1e400, -0, 0.10, 12345678901234567890123, 1E+2, -0.0e-1]",
    '  {"\\u00e9\\/\\u001F": "\\ud83d\\ude00 \\t"}  ',
    '"just a string"', "17", "true", "null", "[]", "{}",
    '{"b": {"d": [{"f": 1, "e": 2}], "c": 3}, "a": 0}',
    '{"ascii": 1, "€": 2, "😀": 3, "\\ue000": 4}',
    "[" * 40 + "]" * 40,  # deeper than MariaDB's own functions go, within Fetcher's bound
]  # fmt: skip
#: JSON the C layout declines (the general path's rules decide): duplicate keys, and text the
#: server's ``json_valid`` accepts or that was stored with checks off but that is not strict
#: JSON, which both paths keep as a string.
_DECLINED_JSONS = ['{"key": 1, "key": 2}', "1.", "[-]", '"\\x"', "not json", '"\\ud800"']
_MOMENTS = [
    "2024-01-02 03:04:05", "2024-01-02 03:04:05.120000", "0001-01-01 00:00:00",
    "9999-12-31 23:59:59.999999", "0000-00-00 00:00:00", "2024-00-15 10:00:00.5",
    "2024-03-00 00:00:00", "1900-02-28 23:59:59.000001",
]  # fmt: skip
_TIMES = ["-838:59:59.000000", "100:00:00.5", "00:00:00", "-00:00:01.100000", "838:59:59"]


def _rows(count: int, seed: int) -> Iterator[tuple[object, ...]]:
    """Rows mixing every hard value with NULLs (seeded: a failure reproduces); the first 400
    without JSON the C layout declines."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets

    def maybe(value: object) -> object:
        return None if rng.random() < 0.15 else value

    for index in range(count):
        doc = rng.choice(_JSONS if index < 400 else _JSONS + _DECLINED_JSONS)
        moment = rng.choice(_MOMENTS)
        yield (
            index,
            maybe(rng.choice([0, 1, -128, 127])),
            maybe(rng.choice([1901, 2024, 2155, 0])),
            maybe(rng.choice([b"\x00\x00", b"\x0a\x01", b"\x0f\xff"])),
            maybe(rng.choice(["ok", 'é "q"'])),
            maybe(rng.choice(["a", "a,b", ""])),
            maybe(rng.choice(_DECIMALS)),
            maybe(rng.choice(["0", "-9999999999", "42"])),
            maybe(rng.choice([0, 2**64 - 1, 2**63])),
            maybe(rng.choice([-(2**63), 2**63 - 1, -1])),
            maybe(rng.choice(_TIMES)),
            maybe(rng.choice(_TIMES)),
            maybe(moment),
            maybe(moment),
            maybe(moment),
            maybe(rng.choice(["2024-01-02 03:04:05.120000", "0000-00-00 00:00:00"])),
            maybe(moment[:10]),
            maybe(bytes(rng.randrange(256) for _ in range(4))),
            maybe(bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 2, 3, 80])))),
            maybe(bytes(rng.randrange(256) for _ in range(rng.choice([0, 57, 200])))),
            maybe(doc),
            maybe(rng.choice(_TEXTS)),
            maybe(rng.choice(["café", "naïve", "plain"])),
            maybe(rng.choice(["a", "ab c", "中"])),
            maybe(rng.choice(["123e4567-e89b-12d3-a456-426614174000", str(index).zfill(32)])),
            maybe(rng.choice(["::1", "2001:db8::ff00:42:8329", "::ffff:192.0.2.1"])),
            maybe(rng.choice(_TEXTS)),
            maybe(index),
            maybe(rng.choice([0.1, -0.0, 3.4e38, 1e-38, 100.0, 16777217.0])),
            maybe(rng.choice([0.1, -0.0, 1e300, 5e-324, 100.0, 1e16, 2.5e-7])),
        )


@pytest.fixture
async def laid() -> AsyncIterator[ConnectionDescriptor]:
    async with fresh_database(_TABLE_SQL) as (database, reader, password):
        conn = await admin_connect(database)
        try:
            async with conn.cursor() as cursor:
                # the JSON check refuses some texts: they are stored as a source whose check
                # was turned off would hold them
                await cursor.execute("SET SESSION sql_mode = '', check_constraint_checks = 0")
                marks = ", ".join(["%s"] * _COLUMNS)
                await cursor.executemany(
                    f"INSERT INTO laid VALUES ({marks})", list(_rows(700, seed=23))
                )
                await cursor.execute(f"SELECT COUNT(*) FROM {quote('laid')}")
                assert (await cursor.fetchone())[0] == 700
        finally:
            conn.close()
        yield reader_descriptor(database, reader, password)


async def _table(connector: MysqlConnector, name: str) -> TableSchema:
    return await table_named(connector, name, [])


async def _both_paths(
    descriptor: ConnectionDescriptor, name: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Written, Written]:
    """What the C layout writes and reads, then the general path."""
    return await both_paths(
        lambda: MysqlConnector(descriptor, batch_size=50),
        lambda fast: monkeypatch.setattr(MysqlConnector, "laid_out", fast),
        name,
    )


async def test_the_c_layout_writes_the_general_paths_bytes_and_rows(
    laid: ConnectionDescriptor, monkeypatch: pytest.MonkeyPatch
) -> None:
    (fast, fast_rows), (general, general_rows) = await _both_paths(laid, "laid", monkeypatch)
    assert fast[1][:8] == ["LaidOutBatch"] * 8  # the first 400 rows: every batch in C
    assert "FastRowBatch" in fast[1]  # a batch with JSON the C layout declines
    assert set(general[1]) == {"FastRowBatch"}
    assert fast[0] == general[0]
    assert fast_rows == general_rows
    rows = json.loads(fast[0])["laid"]
    assert len(rows) == 700
    assert {row["dt"] for row in rows} >= {
        "0000-00-00 00:00:00",
        "2024-00-15 10:00:00.5",
        "2024-01-02T03:04:05.12Z",
        "9999-12-31T23:59:59.999999Z",
    }
    assert {row["t"] for row in rows} >= {"-838:59:59", "100:00:00.5", "-00:00:01.1"}
    assert {row["big"] for row in rows} >= {2**64 - 1}
    assert {json.dumps(row["doc"]) for row in rows} >= {'"not json"', '"1."', '"[-]"'}
    assert {row["we`ird %s key"] for row in rows} >= set(_TEXTS)
    assert {row["db"] for row in rows} >= {0.1, 1e300, 5e-324, 2.5e-7}
    # FLOAT as the server prints it (6 significant digits): what both paths read
    assert {row["fl"] for row in rows} >= {0.1, 100.0, 16777200.0, 3.4e38}


async def test_a_spatial_value_is_laid_out_as_the_general_path_writes_it(
    laid: ConnectionDescriptor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A POINT arrives as ``bytes`` (family OTHER): base64 on both paths."""
    (fast, fast_rows), (general, general_rows) = await _both_paths(laid, "laid_point", monkeypatch)
    assert (fast[1], general[1]) == (["LaidOutBatch"], ["FastRowBatch"])
    assert fast[0] == general[0]
    assert fast_rows == general_rows
    [row] = fast_rows
    assert isinstance(row["pt"], str)
    assert row["pt"]


async def test_a_projection_is_laid_out_in_key_order(laid: ConnectionDescriptor) -> None:
    """Columns selected in another order: each row's members are written in key order."""
    async with MysqlConnector(replace(laid, config_name="projected")) as connector:
        table = await _table(connector, "laid")
        chosen = tuple(c for c in table.columns if c.name in {"ключ", "dt", "id"})[::-1]
        batches = [batch async for batch in connector.stream(TableQuery(table, chosen))]
    laid_out = [batch for batch in batches if isinstance(batch, LaidOutBatch)]
    assert laid_out == batches
    texts = [bytes(batch.encoded_rows(ROW_DEPTH) or b"") for batch in laid_out]
    rows = [row for text in texts for row in json.loads(b"[" + text + b"]")]
    assert len(rows) == 700
    assert all(list(row) == ["dt", "id", "ключ"] for row in rows)
