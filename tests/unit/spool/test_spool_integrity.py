"""§13 "Spool integrity": every encrypted spool chunk's AAD holds its index and a final-chunk
flag, so a spool file whose chunks were reordered, dropped, cut or extended is detected; and
§13 "Files": spool files 0600, directories the process creates 0700."""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from fetcher.adapters.spool import (
    RECORD_BYTES,
    EncryptedSpool,
    EncryptedSpoolFactory,
    SpoolIntegrityError,
)
from fetcher.crypto.aead import (
    DecryptionError,
    new_ephemeral_key,
    open_chunk,
    seal_chunk,
    spool_chunk_aad,
)

_LENGTH = struct.Struct(">I")
RECORDS = 4  # three full records and a final partial one


def payload(size: int) -> bytes:
    return bytes(n % 251 for n in range(size))


async def collect(spool: EncryptedSpool) -> bytes:
    return b"".join([chunk async for chunk in spool.read()])


async def written_spool(directory: Path, size: int) -> tuple[EncryptedSpool, Path, bytes]:
    """A spool past its memory bound, read once, so its file holds every chunk."""
    spool = EncryptedSpoolFactory(0, str(directory)).create()
    data = payload(size)
    for start in range(0, len(data), 300_000):
        await spool.write(data[start : start + 300_000])
    assert await collect(spool) == data
    (path,) = directory.iterdir()
    return spool, path, data


def records(path: Path) -> list[bytes]:
    """The file's records (``length ‖ sealed chunk`` each), in file order."""
    raw, found, offset = path.read_bytes(), [], 0
    while offset < len(raw):
        (length,) = _LENGTH.unpack_from(raw, offset)
        found.append(raw[offset : offset + _LENGTH.size + length])
        offset += _LENGTH.size + length
    return found


def rewrite(path: Path, content: bytes) -> None:
    """Replace the file's bytes in place (same inode: the spool keeps its descriptor)."""
    with path.open("r+b") as handle:
        handle.write(content)
        handle.truncate()


def reorder(parts: list[bytes]) -> bytes:
    return b"".join([parts[1], parts[0], *parts[2:]])


def drop_middle(parts: list[bytes]) -> bytes:
    return b"".join(parts[:1] + parts[2:])


def drop_final(parts: list[bytes]) -> bytes:
    return b"".join(parts[:-1])


def cut_inside_a_record(parts: list[bytes]) -> bytes:
    return b"".join(parts)[: len(parts[0]) + 100]


def cut_inside_the_header(parts: list[bytes]) -> bytes:
    return b"".join(parts[:2]) + parts[2][:2]


def duplicate_final(parts: list[bytes]) -> bytes:
    return b"".join([*parts, parts[-1]])


def append_garbage(parts: list[bytes]) -> bytes:
    return b"".join(parts) + b"\x00"


def replay_first_in_place_of_second(parts: list[bytes]) -> bytes:
    return b"".join([parts[0], parts[0], *parts[2:]])


def flip_a_bit(parts: list[bytes]) -> bytes:
    joined = bytearray(b"".join(parts))
    joined[len(parts[0]) + 40] ^= 0x01
    return bytes(joined)


def huge_length_field(parts: list[bytes]) -> bytes:
    return _LENGTH.pack(0xFFFFFFF0) + parts[0][_LENGTH.size :] + b"".join(parts[1:])


@pytest.mark.parametrize(
    "tamper",
    [
        reorder,
        drop_middle,
        drop_final,
        cut_inside_a_record,
        cut_inside_the_header,
        duplicate_final,
        append_garbage,
        replay_first_in_place_of_second,
        flip_a_bit,
        huge_length_field,
    ],
)
async def test_tampered_spool_files_are_detected(
    tmp_path: Path, tamper: Callable[[list[bytes]], bytes]
) -> None:
    spool, path, _ = await written_spool(tmp_path, 3 * RECORD_BYTES + 12_345)
    parts = records(path)
    assert len(parts) == RECORDS
    rewrite(path, tamper(parts))
    with pytest.raises(SpoolIntegrityError):
        await collect(spool)
    await spool.close()
    assert list(tmp_path.iterdir()) == []


async def test_untampered_file_reads_again(tmp_path: Path) -> None:
    spool, path, data = await written_spool(tmp_path, 3 * RECORD_BYTES + 12_345)
    rewrite(path, b"".join(records(path)))  # the same bytes: still fine
    assert await collect(spool) == data
    await spool.close()


async def test_data_ending_on_a_record_boundary_gets_a_final_chunk(tmp_path: Path) -> None:
    spool, path, data = await written_spool(tmp_path, 2 * RECORD_BYTES)
    parts = records(path)
    # Both full records were sealed while writing, before the end was known: the end is an
    # empty final chunk (nonce + tag only), so dropping it is still detected.
    assert len(parts) == 3
    assert len(parts[-1]) == _LENGTH.size + 12 + 16
    assert await collect(spool) == data
    rewrite(path, drop_final(parts))
    with pytest.raises(SpoolIntegrityError):
        await collect(spool)
    await spool.close()


async def test_writing_after_the_final_chunk_is_refused(tmp_path: Path) -> None:
    spool, _, _ = await written_spool(tmp_path, RECORD_BYTES + 1)
    with pytest.raises(RuntimeError):
        await spool.write(b"more")
    await spool.close()


# --- the AAD itself (crypto/aead.py) ------------------------------------------------------


def test_chunk_opens_only_at_its_own_index_and_flag() -> None:
    key = new_ephemeral_key()
    blob = seal_chunk(key, b"rows", index=3, final=False)
    assert open_chunk(key, blob, index=3, final=False) == b"rows"
    for index, final in ((2, False), (4, False), (3, True), (0, False)):
        with pytest.raises(DecryptionError):
            open_chunk(key, blob, index=index, final=final)


def test_aad_encodes_index_and_flag_unambiguously() -> None:
    seen = {spool_chunk_aad(i, f) for i in (0, 1, 255, 256, 2**40) for f in (False, True)}
    assert len(seen) == 10
    with pytest.raises(ValueError, match="non-negative"):
        spool_chunk_aad(-1, False)


# --- §13 "Files" ---------------------------------------------------------------------------


async def test_spool_file_is_0600_and_created_directories_0700(tmp_path: Path) -> None:
    old_umask = os.umask(0o002)  # a permissive umask must not widen anything
    try:
        directory = tmp_path / "made" / "by" / "fetcher"
        spool = EncryptedSpoolFactory(0, str(directory)).create()
        await spool.write(b"x" * 10)
        (path,) = directory.iterdir()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        for created in (tmp_path / "made", tmp_path / "made" / "by", directory):
            assert stat.S_IMODE(created.stat().st_mode) == 0o700
        await spool.close()
    finally:
        os.umask(old_umask)


async def test_existing_directories_are_left_as_they_are(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    directory.mkdir()
    directory.chmod(0o755)
    spool = EncryptedSpoolFactory(0, str(directory)).create()
    await spool.write(b"x" * 10)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o755
    await spool.close()
