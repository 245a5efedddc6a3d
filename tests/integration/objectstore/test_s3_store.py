"""The S3 result store against a real S3 server (contract §6.3, §4.3 step 5, §2.10)."""

from __future__ import annotations

import asyncio
import os
import secrets
from typing import Any

import pytest

from fetcher.adapters.objectstore.s3 import CONTENT_TYPE, S3ObjectStore
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.services.infrastructure import ObjectStore
from tests.integration.objectstore.conftest import make_store
from tests.services import S3_SECRET_KEY

pytestmark = pytest.mark.integration

MiB = 1024 * 1024


async def fail_while_writing(store: Any, key: str, data: bytes) -> None:
    """Write ``data`` inside the writer block, then fail with ``RuntimeError("boom")``."""
    async with store.open_writer(key) as writer:
        await writer.write(data)
        raise RuntimeError("boom")


def _key() -> str:
    return f"prefix/external-data/{secrets.token_hex(8)}.json"


def _pending_uploads(admin: Any, bucket: str, key: str) -> list[Any]:
    uploads: list[Any] = admin.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", [])
    return uploads


async def _write(store: S3ObjectStore, key: str, data: bytes, chunk: int = MiB) -> None:
    async with store.open_writer(key) as writer:
        for start in range(0, len(data), chunk):
            await writer.write(data[start : start + chunk])


def test_the_store_satisfies_the_port_and_hides_the_secret() -> None:
    store: ObjectStore = make_store("bucket")
    assert S3_SECRET_KEY not in repr(store)
    assert "access" not in repr(store)


def _record_content_types(store: S3ObjectStore) -> dict[str, str]:
    """Capture the Content-Type each upload request carries (before it leaves the client)."""
    sent: dict[str, str] = {}

    def hook(request: Any, event_name: str, **_: Any) -> None:
        value = request.headers.get("Content-Type")
        sent[event_name.rsplit(".", maxsplit=1)[-1]] = (
            value.decode() if isinstance(value, bytes) else value
        )

    events = store._client.meta.events
    for operation in ("PutObject", "CreateMultipartUpload"):
        events.register(f"before-send.s3.{operation}", hook)
    return sent


async def test_small_round_trip_sends_the_octet_stream_content_type(
    s3_store: S3ObjectStore, s3_admin: Any, s3_bucket: str
) -> None:
    sent = _record_content_types(s3_store)
    key = _key()
    await _write(s3_store, key, b"aGVsbG8=", chunk=3)
    assert await s3_store.read(key) == b"aGVsbG8="
    assert await s3_store.exists(key)
    assert sent == {"PutObject": CONTENT_TYPE}
    assert s3_admin.head_object(Bucket=s3_bucket, Key=key)["ContentLength"] == 8


async def test_the_stored_content_type_is_octet_stream(
    s3_store: S3ObjectStore, s3_admin: Any, s3_bucket: str
) -> None:
    """SeaweedFS replaces ``application/octet-stream`` by a guess from a ``.json`` extension,
    so the stored value is checked on a key without one (real S3 keeps what was sent)."""
    for size in (10, 6 * MiB):
        key = f"external-data/{secrets.token_hex(8)}"
        await _write(s3_store, key, os.urandom(size))
        assert s3_admin.head_object(Bucket=s3_bucket, Key=key)["ContentType"] == CONTENT_TYPE


async def test_empty_object_round_trip(s3_store: S3ObjectStore) -> None:
    key = _key()
    async with s3_store.open_writer(key):
        pass
    assert await s3_store.read(key) == b""


async def test_multipart_round_trip_of_12_mib(
    s3_store: S3ObjectStore, s3_admin: Any, s3_bucket: str
) -> None:
    sent = _record_content_types(s3_store)
    key = _key()
    data = os.urandom(12 * MiB + 17)
    await _write(s3_store, key, data)
    assert sent == {"CreateMultipartUpload": CONTENT_TYPE}
    assert await s3_store.read(key) == data
    head = s3_admin.head_object(Bucket=s3_bucket, Key=key)
    assert head["ContentLength"] == len(data)
    assert _pending_uploads(s3_admin, s3_bucket, key) == []


async def test_a_second_write_overwrites_the_key(s3_store: S3ObjectStore) -> None:
    key = _key()
    await _write(s3_store, key, b"first")
    await _write(s3_store, key, b"second")
    assert await s3_store.read(key) == b"second"


@pytest.mark.parametrize("size", [100, 7 * MiB])
async def test_an_exception_in_the_block_leaves_nothing(
    s3_store: S3ObjectStore, s3_admin: Any, s3_bucket: str, size: int
) -> None:
    key = _key()
    with pytest.raises(RuntimeError, match="boom"):
        await fail_while_writing(s3_store, key, os.urandom(size))
    assert not await s3_store.exists(key)
    assert _pending_uploads(s3_admin, s3_bucket, key) == []


async def test_an_exception_removes_a_previous_object_at_the_key(
    s3_store: S3ObjectStore,
) -> None:
    """§4.3 step 5: after a failed write no object may remain at the key."""
    key = _key()
    await _write(s3_store, key, b"old")
    with pytest.raises(RuntimeError):
        await fail_while_writing(s3_store, key, b"new")
    assert not await s3_store.exists(key)


async def test_cancellation_leaves_nothing(
    s3_store: S3ObjectStore, s3_admin: Any, s3_bucket: str
) -> None:
    key = _key()
    started = asyncio.Event()

    async def upload() -> None:
        async with s3_store.open_writer(key) as writer:
            await writer.write(os.urandom(6 * MiB))  # one part is already uploaded
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(upload())
    await asyncio.wait_for(started.wait(), 30)
    assert len(_pending_uploads(s3_admin, s3_bucket, key)) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not await s3_store.exists(key)
    assert _pending_uploads(s3_admin, s3_bucket, key) == []


async def test_read_of_a_missing_key_is_not_found(s3_store: S3ObjectStore) -> None:
    assert not await s3_store.exists(_key())
    with pytest.raises(EngineError) as caught:
        await s3_store.read(_key())
    assert caught.value.category is ErrorCategory.NOT_FOUND


async def test_check_passes_on_the_bucket(s3_store: S3ObjectStore) -> None:
    await s3_store.check()


async def test_check_fails_on_a_missing_bucket(s3_bucket: str) -> None:
    async with make_store(f"{s3_bucket}-missing") as store:
        with pytest.raises(EngineError) as caught:
            await store.check()
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.detail


async def test_a_write_to_a_missing_bucket_fails_to_store(s3_bucket: str) -> None:
    async with make_store(f"{s3_bucket}-missing") as store:
        with pytest.raises(EngineError) as caught:
            async with store.open_writer(_key()) as writer:
                await writer.write(b"x")
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.message == "failed to store result"


async def test_wrong_credentials_fail_without_leaking_them(s3_bucket: str) -> None:
    secret = "wrong-secret-" + secrets.token_hex(8)
    async with make_store(s3_bucket, secret_key=secret) as store:
        with pytest.raises(EngineError) as caught:
            async with store.open_writer(_key()) as writer:
                await writer.write(b"x")
    error = caught.value
    assert error.category is ErrorCategory.UNAVAILABLE
    assert secret not in f"{error} {error.text()} {error!r}"


async def test_unreachable_endpoint_is_unavailable_without_secrets() -> None:
    store = make_store("bucket", endpoint="http://127.0.0.1:1", connect_timeout=1.0, max_attempts=1)
    async with store:
        with pytest.raises(EngineError) as caught:
            async with store.open_writer(_key()) as writer:
                await writer.write(b"x")
        with pytest.raises(EngineError) as probe:
            await store.check()
    for error in (caught.value, probe.value):
        assert error.category is ErrorCategory.UNAVAILABLE
        assert S3_SECRET_KEY not in f"{error} {error.text()} {error!r}"
    assert caught.value.message == "failed to store result"
    assert "Could not connect" in (caught.value.detail or "")


async def test_open_and_close_are_idempotent(s3_bucket: str) -> None:
    store = make_store(s3_bucket)
    await store.close()
    await store.open()
    await store.open()
    await store.check()
    await store.close()
    await store.close()
    with pytest.raises(RuntimeError, match="not open"):
        await store.check()


def test_parts_below_the_s3_minimum_are_refused() -> None:
    with pytest.raises(ValueError, match="part_size"):
        make_store("bucket", part_size=MiB)


async def test_ranged_reads_stream_the_stored_bytes(s3_store: S3ObjectStore) -> None:
    """§14.2: ``size`` and ``read_range`` (inclusive end) over a multipart object, in chunks
    no larger than the read chunk; a missing key is NOT_FOUND for both."""
    key, data = _key(), os.urandom(6 * MiB + 123)
    await _write(s3_store, key, data)
    assert await s3_store.size(key) == len(data)
    chunks = [c async for c in s3_store.read_range(key, 0, len(data) - 1)]
    assert b"".join(chunks) == data
    assert max(len(c) for c in chunks) <= 256 * 1024
    middle = b"".join([c async for c in s3_store.read_range(key, MiB - 7, 3 * MiB)])
    assert middle == data[MiB - 7 : 3 * MiB + 1]
    missing = _key()
    with pytest.raises(EngineError) as caught:
        await s3_store.size(missing)
    assert caught.value.category is ErrorCategory.NOT_FOUND
    with pytest.raises(EngineError) as caught:
        _ = [c async for c in s3_store.read_range(missing, 0, 9)]
    assert caught.value.category is ErrorCategory.NOT_FOUND
