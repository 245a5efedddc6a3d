"""The embedded local result store (contract §6.3, §4.3 step 5, §2.10); no network."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fetcher.adapters.objectstore import local
from fetcher.adapters.objectstore.local import RELEASE_WINDOW, LocalObjectStore
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.services.infrastructure import ObjectStore

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


async def test_ranged_reads_stream_the_stored_bytes(store: LocalObjectStore) -> None:
    """§14.2: ``size`` and ``read_range`` (inclusive end), a bounded chunk at a time; a
    missing key is NOT_FOUND for both."""
    data = os.urandom(1024 * 1024 + 77)
    async with store.open_writer(KEY) as writer:
        await writer.write(data)
    assert await store.size(KEY) == len(data)
    chunks = [c async for c in store.read_range(KEY, 0, len(data) - 1)]
    assert b"".join(chunks) == data
    assert max(len(c) for c in chunks) <= 256 * 1024
    assert b"".join([c async for c in store.read_range(KEY, 5, 300_000)]) == data[5:300_001]
    with pytest.raises(EngineError) as caught:
        await store.size("external-data/missing.json")
    assert caught.value.category is ErrorCategory.NOT_FOUND
    with pytest.raises(EngineError) as caught:
        _ = [c async for c in store.read_range("external-data/missing.json", 0, 9)]
    assert caught.value.category is ErrorCategory.NOT_FOUND


class _Advice:
    """Records ``posix_fadvise`` calls as ``(offset, length)`` and passes them on (or fails)."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[int, int]] = []
        self.fail = fail

    def __call__(self, fd: int, offset: int, length: int, advice: int) -> None:
        assert advice == os.POSIX_FADV_DONTNEED
        self.calls.append((offset, length))
        if self.fail:
            raise OSError(errno.EINVAL, "Invalid argument")
        os.posix_fadvise(fd, offset, length, advice)


async def _write_mib(store: LocalObjectStore, mib: int, tail: bytes = b"") -> bytes:
    data = b"".join(os.urandom(1 << 20) for _ in range(mib)) + tail
    async with store.open_writer(KEY) as writer:
        for start in range(0, len(data), 1 << 20):
            await writer.write(data[start : start + (1 << 20)])
    return data


async def test_each_written_window_is_advised_out_of_the_page_cache_one_window_later(
    store: LocalObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each full window starts its writeback and the previous one is dropped; after the fsync
    the whole object is advised once more."""
    advice = _Advice()
    monkeypatch.setattr(local, "_FADVISE", advice)
    windows = 5
    data = await _write_mib(store, windows * RELEASE_WINDOW >> 20, tail=b"x" * 1000)
    assert await store.read(KEY) == data
    during = [(max(0, k - 2) * RELEASE_WINDOW, k * RELEASE_WINDOW) for k in range(1, windows + 1)]
    assert advice.calls == [(start, end - start) for start, end in during] + [(0, len(data))]


async def test_a_failing_or_missing_advice_stores_the_same_object(
    store: LocalObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The advice is only advice: an error from it, or a platform without it, changes nothing."""
    advice = _Advice(fail=True)
    monkeypatch.setattr(local, "_FADVISE", advice)
    data = await _write_mib(store, 2 * RELEASE_WINDOW >> 20)
    assert await store.read(KEY) == data
    assert len(advice.calls) == 3
    monkeypatch.setattr(local, "_FADVISE", None)
    assert await store.read(KEY) == data
    data = await _write_mib(store, 2 * RELEASE_WINDOW >> 20)
    assert await store.read(KEY) == data


def _file_system_type(path: Path) -> str:
    """The type of the mount holding ``path`` (the longest mount point that contains it)."""
    mounts = [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()]
    inside = [(point, kind) for point, kind in mounts if path.is_relative_to(point)]
    return max(inside, key=lambda mount: len(mount[0]))[1]


def _cached_bytes(path: Path) -> int:
    """How many bytes of ``path`` the page cache holds, as util-linux's ``fincore`` reports."""
    fincore = shutil.which("fincore")
    assert fincore, "fincore (util-linux) reports which pages of a file are cached"
    return int(
        subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
            [fincore, "--bytes", "--noheadings", "--output", "RES", str(path)],
            capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip


async def test_a_stored_object_does_not_stay_in_the_page_cache(
    store: LocalObjectStore, tmp_path: Path
) -> None:
    """On the real kernel: a freshly written 24 MiB object is (almost) all cached without the
    advice; with it, less than one window of it is."""
    if _file_system_type(tmp_path.resolve()) == "tmpfs":
        pytest.skip("tmpfs: the page cache holds a tmpfs file's only copy, nothing to drop")
    await _write_mib(store, 24)
    assert await asyncio.to_thread(_cached_bytes, store.path_for(KEY)) < RELEASE_WINDOW


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
