"""The S3 writer uploads each full part in the background while the next one fills (§4.3.1
direct streaming overlaps extraction and upload); a failure of a part in flight, a failure of
the producer while a part is in flight, and a cancellation all leave no object and no
unfinished multipart upload (§4.3 step 5)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from fetcher.adapters.objectstore.s3 import S3ObjectStore
from fetcher.engine.errors import EngineError, ErrorCategory
from tests.integration.objectstore.test_s3_store import MiB, _key, _pending_uploads


async def test_parts_go_out_in_order_while_the_producer_writes(
    s3_store: S3ObjectStore, s3_admin: Any, s3_bucket: str
) -> None:
    key = _key()
    data = os.urandom(23 * MiB + 5)
    async with s3_store.open_writer(key) as writer:
        for start in range(0, len(data), 700_001):  # chunks that do not divide a part
            await writer.write(data[start : start + 700_001])
    assert await s3_store.read(key) == data
    assert _pending_uploads(s3_admin, s3_bucket, key) == []


async def _write_while_the_upload_vanishes(
    store: S3ObjectStore, admin: Any, bucket: str, key: str
) -> None:
    async with store.open_writer(key) as writer:
        await writer.write(os.urandom(6 * MiB))  # part 1 starts in the background
        (upload,) = _pending_uploads(admin, bucket, key)
        # the upload vanishes under the writer: the part in flight or the next one fails
        admin.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload["UploadId"])
        for _ in range(3):
            await writer.write(os.urandom(6 * MiB))


async def test_a_part_failing_in_flight_fails_the_write_and_leaves_nothing(
    s3_store: S3ObjectStore, s3_admin: Any, s3_bucket: str
) -> None:
    key = _key()
    with pytest.raises(EngineError) as caught:
        await _write_while_the_upload_vanishes(s3_store, s3_admin, s3_bucket, key)
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.message == "failed to store result"
    assert not await s3_store.exists(key)
    assert _pending_uploads(s3_admin, s3_bucket, key) == []


async def _fail_with_a_part_in_flight(store: S3ObjectStore, key: str) -> None:
    async with store.open_writer(key) as writer:
        await writer.write(os.urandom(11 * MiB))  # part 1 in flight, 6 MiB buffered
        raise RuntimeError("size limit")  # e.g. §5.5 proven exceeded mid-stream


async def test_the_producer_failing_while_a_part_is_in_flight_leaves_nothing(
    s3_store: S3ObjectStore, s3_admin: Any, s3_bucket: str
) -> None:
    key = _key()
    with pytest.raises(RuntimeError, match="size limit"):
        await _fail_with_a_part_in_flight(s3_store, key)
    assert not await s3_store.exists(key)
    assert _pending_uploads(s3_admin, s3_bucket, key) == []


async def test_cancellation_while_a_part_is_in_flight_leaves_nothing(
    s3_store: S3ObjectStore, s3_admin: Any, s3_bucket: str
) -> None:
    key = _key()
    writing = asyncio.Event()

    async def upload() -> None:
        async with s3_store.open_writer(key) as writer:
            await writer.write(os.urandom(6 * MiB))
            writing.set()
            while True:  # the producer keeps writing: every part waits for the one in flight
                await writer.write(os.urandom(MiB))

    task = asyncio.create_task(upload())
    await asyncio.wait_for(writing.wait(), 30)
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not await s3_store.exists(key)
    assert _pending_uploads(s3_admin, s3_bucket, key) == []
