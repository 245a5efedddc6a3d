"""``open_result_sync`` (issue 33, item 11): a synchronous program opens a result without
asyncio — the same verification and rows as ``await open_result``, the same refusal of a
tampered object, and a clear error where an event loop already runs."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

from fetcher.consumer import (
    ConsumerKeys,
    IntegrityError,
    LocalFolderSource,
    open_result,
    open_result_sync,
)
from tests.unit.consumer.conftest import MASTER_KEY, document_bytes, store_document

KEYS = ConsumerKeys.from_master(MASTER_KEY)
DOC = {"pg": {"accounts": [{"id": 1, "email": "a@x"}, {"id": 2, "email": "b@x"}]}}


def test_a_job_answer_opens_without_asyncio(tmp_path: Path) -> None:
    key, mac = store_document(tmp_path, KEYS, document_bytes(DOC))
    job = {"id": "j", "status": "completed", "resultPath": key, "resultHmac": mac}
    with open_result_sync(job, LocalFolderSource(tmp_path), KEYS) as result:
        rows = list(result.rows())
    assert rows == [("pg", "accounts", row) for row in DOC["pg"]["accounts"]]


def test_a_tampered_object_raises_and_yields_nothing(tmp_path: Path) -> None:
    key, mac = store_document(tmp_path, KEYS, document_bytes(DOC))
    stored = tmp_path / key
    raw = bytearray(base64.b64decode(stored.read_bytes()))
    raw[20] ^= 1
    stored.write_bytes(base64.b64encode(bytes(raw)))
    job = {"status": "completed", "resultPath": key, "resultHmac": mac}
    with pytest.raises(IntegrityError):
        open_result_sync(job, LocalFolderSource(tmp_path), KEYS)


async def test_inside_a_running_loop_it_points_to_the_async_form(tmp_path: Path) -> None:
    key, mac = store_document(tmp_path, KEYS, document_bytes(DOC))
    job = {"status": "completed", "resultPath": key, "resultHmac": mac}
    with pytest.raises(RuntimeError, match=r"use 'await open_result\(\.\.\.\)' there"):
        open_result_sync(job, LocalFolderSource(tmp_path), KEYS)
    with await open_result(job, LocalFolderSource(tmp_path), KEYS) as result:  # the async form
        assert result.row_counts() == {"pg": {"accounts": 2}}
    assert asyncio.get_running_loop().is_running()
