"""§4.3.1: a spool past its memory bound goes to disk only encrypted, and leaves nothing."""

from __future__ import annotations

import os
import stat
import tracemalloc
from pathlib import Path

from fetcher.adapters.spool import RECORD_BYTES, EncryptedSpoolFactory

MARKER = b"PLAINTEXT-ROW-MARKER "


async def _collect(spool: object) -> bytes:
    return b"".join([chunk async for chunk in spool.read()])  # type: ignore[attr-defined]


async def test_small_spools_stay_in_memory(tmp_path: Path) -> None:
    spool = EncryptedSpoolFactory(1024, str(tmp_path)).create()
    await spool.write(b"abc")
    await spool.write(b"def")
    assert spool.size == 6
    assert list(tmp_path.iterdir()) == []
    assert await _collect(spool) == b"abcdef"
    await spool.close()


async def test_overflow_is_encrypted_on_disk_and_removed_on_close(tmp_path: Path) -> None:
    spool = EncryptedSpoolFactory(4096, str(tmp_path)).create()
    payload = MARKER * (RECORD_BYTES // len(MARKER) * 3)
    for start in range(0, len(payload), 10_000):
        await spool.write(payload[start : start + 10_000])
    assert spool.size == len(payload)
    (path,) = tmp_path.iterdir()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert MARKER not in path.read_bytes()
    assert await _collect(spool) == payload
    assert MARKER not in path.read_bytes()
    await spool.close()
    await spool.close()  # safe twice
    assert list(tmp_path.iterdir()) == []


async def test_close_without_reading_discards_the_file(tmp_path: Path) -> None:
    spool = EncryptedSpoolFactory(0, str(tmp_path)).create()
    await spool.write(MARKER * 10)
    assert len(list(tmp_path.iterdir())) == 1
    await spool.close()
    assert list(tmp_path.iterdir()) == []


async def test_one_large_write_is_never_buffered_whole(tmp_path: Path) -> None:
    """A write of many records (one huge value) goes to disk a record at a time: the spool
    allocates about two records beside the caller's bytes, not a copy of them."""
    spool = EncryptedSpoolFactory(4096, str(tmp_path)).create()
    payload = os.urandom(24 * RECORD_BYTES + 5)
    tracemalloc.start()
    try:
        await spool.write(payload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * RECORD_BYTES, f"{peak / RECORD_BYTES:.1f} records allocated"
    assert await _collect(spool) == payload
    await spool.close()
