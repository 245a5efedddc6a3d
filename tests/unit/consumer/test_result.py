"""open_result: verify before yielding, stream datasource → table → rows, refuse tampering."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from fetcher.consumer import (
    ConsumerKeys,
    IntegrityError,
    LocalFolderSource,
    ResultError,
    ResultNotFoundError,
    ResultRef,
    open_result,
)
from tests.unit.consumer.conftest import MASTER_KEY, document_bytes, store_document

KEYS = ConsumerKeys.from_master(MASTER_KEY)


def big_document(rows: int) -> dict[str, Any]:
    return {
        "mongo": {"empty": [], "events": [{"k": i, "v": "ü" * (i % 7)} for i in range(rows)]},
        "pg": {
            "accounts": [
                {"id": i, "email": f"u{i}@example.com", "j": {"n": 1.50, "a": [1, None]}}
                for i in range(rows)
            ],
            "z_empty": [],
        },
        "zz_nothing": {},
    }


async def test_streams_every_table_in_order_with_rows_equal_to_json_loads(
    tmp_path: Path,
) -> None:
    doc = big_document(30_000)  # several MiB: crosses many spool and read chunks
    plain = document_bytes(doc)
    assert len(plain) > 3 * 1024 * 1024
    key, mac = store_document(tmp_path, KEYS, plain)
    ref = ResultRef(key, mac, size_bytes=len(plain))
    async with await open_result(ref, LocalFolderSource(tmp_path, chunk_size=7777), KEYS) as res:
        assert res.size_bytes == len(plain)
        seen = [(t.datasource, t.table, list(t.rows)) for t in res.tables()]
        assert b"".join(res.iter_bytes()) == plain
        assert res.row_counts() == {
            "mongo": {"empty": 0, "events": 30_000},
            "pg": {"accounts": 30_000, "z_empty": 0},
        }
    expected = json.loads(plain)
    assert [(d, t) for d, t, _ in seen] == [
        ("mongo", "empty"),
        ("mongo", "events"),
        ("pg", "accounts"),
        ("pg", "z_empty"),
    ]
    for datasource, table, rows in seen:
        assert rows == expected[datasource][table]


async def test_unread_rows_are_skipped_and_decimal_parsing_is_available(tmp_path: Path) -> None:
    plain = document_bytes(big_document(100))
    key, mac = store_document(tmp_path, KEYS, plain)
    with await open_result(ResultRef(key, mac), LocalFolderSource(tmp_path), KEYS) as res:
        names = [t.table for t in res.tables()]  # no row read at all
        assert names == ["empty", "events", "accounts", "z_empty"]
        rows = [r for d, _, r in res.rows(parse_float=Decimal) if d == "pg"]
        assert rows[0]["j"]["n"] == Decimal("1.5")


async def test_event_or_job_response_opens_too(tmp_path: Path) -> None:
    plain = document_bytes({"pg": {"t": [{"a": 1}]}})
    key, mac = store_document(tmp_path, KEYS, plain)
    job = {"id": "x", "status": "completed", "resultPath": key, "resultHmac": mac}
    with await open_result(job, LocalFolderSource(tmp_path), KEYS) as res:
        assert list(res.rows()) == [("pg", "t", {"a": 1})]
    with pytest.raises(ResultError):
        await open_result({"status": "failed"}, LocalFolderSource(tmp_path), KEYS)


def _flip(stored: bytes, index: int) -> bytes:
    raw = bytearray(base64.b64decode(stored))
    raw[index] ^= 0x01
    return base64.b64encode(bytes(raw))


@pytest.mark.parametrize("where", ["nonce", "first", "middle", "last", "tag"])
async def test_one_flipped_byte_raises_integrity_and_yields_no_row(
    tmp_path: Path, where: str
) -> None:
    plain = document_bytes(big_document(5000))
    key, mac = store_document(tmp_path, KEYS, plain)
    path = tmp_path / key
    stored = path.read_bytes()
    size = len(base64.b64decode(stored))
    index = {"nonce": 3, "first": 12, "middle": size // 2, "last": size - 17, "tag": size - 1}
    path.write_bytes(_flip(stored, index[where]))
    with pytest.raises(IntegrityError):
        await open_result(ResultRef(key, mac), LocalFolderSource(tmp_path), KEYS)


@pytest.mark.parametrize("cut", [1, 4, 40, 4096])
async def test_truncated_object_raises_integrity(tmp_path: Path, cut: int) -> None:
    plain = document_bytes(big_document(500))
    key, mac = store_document(tmp_path, KEYS, plain)
    path = tmp_path / key
    path.write_bytes(path.read_bytes()[:-cut])
    with pytest.raises(IntegrityError):
        await open_result(ResultRef(key, mac), LocalFolderSource(tmp_path), KEYS)


async def test_wrong_hmac_wrong_size_and_wrong_keys(tmp_path: Path) -> None:
    plain = document_bytes({"pg": {"t": []}})
    key, mac = store_document(tmp_path, KEYS, plain)
    source = LocalFolderSource(tmp_path)
    with pytest.raises(IntegrityError):
        await open_result(ResultRef(key, "0" * 64), source, KEYS)
    with pytest.raises(IntegrityError):
        await open_result(ResultRef(key, mac, size_bytes=len(plain) + 1), source, KEYS)
    other = ConsumerKeys(external_hmac=KEYS.external_hmac, storage=b"\x02" * 32)
    with pytest.raises(IntegrityError):
        await open_result(ResultRef(key, mac), source, other)
    with pytest.raises(ResultError, match="storage key"):
        await open_result(ResultRef(key, mac), source, ConsumerKeys(KEYS.external_hmac))


async def test_missing_object_and_escaping_keys(tmp_path: Path) -> None:
    source = LocalFolderSource(tmp_path)
    with pytest.raises(ResultNotFoundError):
        await open_result(ResultRef("external-data/none.json", "0" * 64), source, KEYS)
    for key in ("../etc/passwd", "/etc/passwd", "a/../../b"):
        with pytest.raises(ResultError):
            await open_result(ResultRef(key, "0" * 64), source, KEYS)


async def test_closed_result_refuses_reads(tmp_path: Path) -> None:
    plain = document_bytes({"pg": {"t": [{"a": 1}]}})
    key, mac = store_document(tmp_path, KEYS, plain)
    res = await open_result(ResultRef(key, mac), LocalFolderSource(tmp_path), KEYS)
    res.close()
    res.close()
    with pytest.raises(ResultError):
        list(res.rows())
