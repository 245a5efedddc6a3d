"""The embedded local result store (contract §6.3, §4.3 step 5, §2.10); no network."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from fetcher.adapters.objectstore.local import LocalObjectStore
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.services.runtime_ports import ObjectStore

KEY = "prefix/external-data/0190a1b2-0000-7000-8000-000000000001.json"


async def fail_while_writing(store: Any, key: str, data: bytes) -> None:
    """Write ``data`` inside the writer block, then fail with ``RuntimeError("boom")``."""
    async with store.open_writer(key) as writer:
        await writer.write(data)
        raise RuntimeError("boom")


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(str(tmp_path / "objects"))


def test_the_store_satisfies_the_port(store: LocalObjectStore) -> None:
    port: ObjectStore = store
    assert "objects" in repr(port)


async def test_round_trip_writes_the_file_at_root_slash_key(
    store: LocalObjectStore, tmp_path: Path
) -> None:
    async with store.open_writer(KEY) as writer:
        await writer.write(b"aGVs")
        await writer.write(b"bG8=")
    assert await store.read(KEY) == b"aGVsbG8="
    assert await store.exists(KEY)
    path = tmp_path / "objects" / KEY
    assert path.read_bytes() == b"aGVsbG8="
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _leftovers(tmp_path / "objects") == [KEY]


async def test_large_writes_round_trip(store: LocalObjectStore) -> None:
    data = os.urandom(3 * 1024 * 1024 + 5)
    async with store.open_writer(KEY) as writer:
        for start in range(0, len(data), 1024 * 1024):
            await writer.write(data[start : start + 1024 * 1024])
    assert await store.read(KEY) == data


async def test_nothing_is_visible_before_the_block_exits(
    store: LocalObjectStore, tmp_path: Path
) -> None:
    async with store.open_writer(KEY) as writer:
        await writer.write(b"partial")
        assert not await store.exists(KEY)
        (temp,) = _leftovers(tmp_path / "objects")
        assert Path(temp).name.startswith(".")
    assert await store.exists(KEY)


async def test_a_rewrite_replaces_the_object(store: LocalObjectStore) -> None:
    for body in (b"first", b"second"):
        async with store.open_writer(KEY) as writer:
            await writer.write(body)
    assert await store.read(KEY) == b"second"


async def test_an_exception_leaves_nothing(store: LocalObjectStore, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        await fail_while_writing(store, KEY, b"partial")
    assert not await store.exists(KEY)
    assert _leftovers(tmp_path / "objects") == []


async def test_an_exception_leaves_no_object_at_the_key(store: LocalObjectStore) -> None:
    """The port's rule (as on S3): after a failed write nothing remains at the key."""
    async with store.open_writer(KEY) as writer:
        await writer.write(b"old")
    with pytest.raises(RuntimeError):
        await fail_while_writing(store, KEY, b"new")
    assert not await store.exists(KEY)


async def test_cancellation_leaves_nothing(store: LocalObjectStore, tmp_path: Path) -> None:
    started = asyncio.Event()

    async def upload() -> None:
        async with store.open_writer(KEY) as writer:
            await writer.write(b"partial")
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(upload())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _leftovers(tmp_path / "objects") == []


@pytest.mark.parametrize(
    "key",
    ["", "/etc/passwd", "../escape.json", "a/../../escape.json", "a//b", "a/./b", "a\\b", "a\x00b"],
)
async def test_keys_that_could_escape_the_root_are_refused(
    store: LocalObjectStore, key: str
) -> None:
    with pytest.raises(EngineError) as caught:
        async with store.open_writer(key):
            pass
    assert caught.value.category is ErrorCategory.VALIDATION
    with pytest.raises(EngineError):
        await store.read(key)


async def test_a_symlink_out_of_the_root_is_refused(
    store: LocalObjectStore, tmp_path: Path
) -> None:
    (tmp_path / "objects").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "objects" / "link").symlink_to(tmp_path / "outside")
    with pytest.raises(EngineError) as caught:
        async with store.open_writer("link/x.json"):
            pass
    assert caught.value.category is ErrorCategory.VALIDATION
    assert list((tmp_path / "outside").iterdir()) == []


async def test_read_of_a_missing_key_is_not_found(store: LocalObjectStore) -> None:
    assert not await store.exists(KEY)
    with pytest.raises(EngineError) as caught:
        await store.read(KEY)
    assert caught.value.category is ErrorCategory.NOT_FOUND


async def test_check_creates_the_directory_and_leaves_nothing(
    store: LocalObjectStore, tmp_path: Path
) -> None:
    await store.check()
    assert (tmp_path / "objects").is_dir()
    assert _leftovers(tmp_path / "objects") == []


async def test_check_fails_when_the_root_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    store = LocalObjectStore(str(tmp_path / "file"))
    with pytest.raises(EngineError) as caught:
        await store.check()
    assert caught.value.category is ErrorCategory.UNAVAILABLE


async def test_a_storage_failure_is_failed_to_store_result(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    store = LocalObjectStore(str(tmp_path / "file"))
    with pytest.raises(EngineError) as caught:
        async with store.open_writer(KEY):
            pass
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.message == "failed to store result"
    assert caught.value.detail
