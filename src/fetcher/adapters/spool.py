"""Result spools that move to disk only encrypted (contract §4.3.1, §13).

A spool keeps up to ``memory_bytes`` in memory. Past that, everything (the buffered bytes
first) goes to a temporary file created with ``O_EXCL`` and mode 0600, each chunk sealed with
AES-256-GCM under an ephemeral per-job key (fresh nonce per chunk) that lives only in memory.
No plaintext result byte ever touches disk. ``close`` removes the file and forgets the key on
every exit path.

Integrity (§13 "Spool integrity"): a record on disk is ``length(4, big-endian) ‖ sealed chunk``,
and each chunk's AAD holds its index and a final-chunk flag (:func:`spool_chunk_aad`). The first
read seals whatever is buffered as the final chunk (an empty one when the data ended on a record
boundary), so every on-disk spool ends with exactly one final chunk. The reader expects chunks
0, 1, … in order, the last one and only the last one final, and the count the writer kept in
memory: a reordered, dropped, altered, cut or extended file fails with
:class:`SpoolIntegrityError` instead of yielding wrong bytes. Records are read through the
descriptor the spool created, never by reopening the path.

Directories (§13 "Files"): a spool directory that does not exist yet is created 0700 (every
missing component); an existing one is left as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
import tempfile
from collections.abc import AsyncIterator

from fetcher.crypto.aead import (
    NONCE_SIZE,
    TAG_SIZE,
    DecryptionError,
    new_ephemeral_key,
    open_chunk,
    seal_chunk,
)

__all__ = ["EncryptedSpool", "EncryptedSpoolFactory", "SpoolIntegrityError"]

_LENGTH = struct.Struct(">I")
#: Plaintext bytes sealed per disk record; reads come back in records of this size.
RECORD_BYTES = 1024 * 1024
_MAX_SEALED = NONCE_SIZE + RECORD_BYTES + TAG_SIZE


class SpoolIntegrityError(Exception):
    """The spool file does not hold exactly the chunks this spool wrote, in order (§13)."""

    def __init__(self) -> None:
        super().__init__("result spool integrity check failed")


def make_private_dirs(directory: str) -> None:
    """Create ``directory`` and its missing parents with mode 0700 (§13 "Files").

    ``chmod`` after ``mkdir`` because the umask may have removed bits; directories that exist
    already are never changed.
    """
    missing: list[str] = []
    current = os.path.abspath(directory)
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        os.chmod(path, 0o700)


class EncryptedSpool:
    """The engine's ``Spool`` port with an encrypted disk overflow."""

    def __init__(self, memory_bytes: int, directory: str | None = None) -> None:
        self._memory_bytes = memory_bytes
        self._directory = directory
        self._buffer = bytearray()
        self._size = 0
        self._key: bytes | None = None
        self._path: str | None = None
        self._fd: int | None = None
        self._chunks = 0  # sealed chunks written to the file
        self._sealed = False  # the final chunk is written: no more writes

    def __repr__(self) -> str:
        return f"EncryptedSpool(size={self._size}, on_disk={self._path is not None})"

    @property
    def size(self) -> int:
        return self._size

    async def write(self, data: bytes) -> None:
        """Taken a record's worth at a time, so that a large write (one huge value) is never
        copied whole into the buffer once the spool is on disk."""
        if self._sealed:
            raise RuntimeError("spool is sealed: it was read already")
        self._size += len(data)
        with memoryview(data) as view:
            for start in range(0, len(view), RECORD_BYTES):
                self._buffer += view[start : start + RECORD_BYTES]
                if self._fd is None and len(self._buffer) <= self._memory_bytes:
                    continue
                if len(self._buffer) >= RECORD_BYTES or self._fd is None:
                    await asyncio.to_thread(self._flush, False)

    def _open_file(self) -> tuple[int, bytes]:
        if self._directory is not None:
            make_private_dirs(self._directory)
        key = new_ephemeral_key()
        # mkstemp: O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600 (§4.3.1).
        fd, path = tempfile.mkstemp(prefix="fetcher-spool-", dir=self._directory)
        self._path = path
        return fd, key

    def _append(self, fd: int, key: bytes, record: bytes, final: bool) -> None:
        sealed = seal_chunk(key, record, index=self._chunks, final=final)
        os.write(fd, _LENGTH.pack(len(sealed)) + sealed)
        self._chunks += 1

    def _flush(self, final: bool) -> None:
        """Seal full records; with ``final``, also the rest as the one final chunk."""
        if self._fd is None:
            self._fd, self._key = self._open_file()
        fd, key = self._fd, self._key
        if key is None:
            raise RuntimeError("spool is closed")
        while len(self._buffer) > RECORD_BYTES or (len(self._buffer) == RECORD_BYTES and not final):
            record = bytes(self._buffer[:RECORD_BYTES])
            del self._buffer[:RECORD_BYTES]
            self._append(fd, key, record, final=False)
        if final:
            record, self._buffer = bytes(self._buffer), bytearray()
            self._append(fd, key, record, final=True)
            self._sealed = True

    async def read(self) -> AsyncIterator[bytes]:
        if self._fd is None:
            if self._buffer:
                yield bytes(self._buffer)
            return
        if not self._sealed:
            await asyncio.to_thread(self._flush, True)
        fd, key, count = self._fd, self._key, self._chunks
        if key is None:
            raise RuntimeError("spool is closed")
        offset = 0
        for index in range(count):
            sealed, offset = await asyncio.to_thread(_read_record, fd, offset)
            try:
                yield open_chunk(key, sealed, index=index, final=index == count - 1)
            except DecryptionError:
                raise SpoolIntegrityError from None
        if os.fstat(fd).st_size != offset:
            raise SpoolIntegrityError  # bytes past the final chunk

    async def close(self) -> None:
        self._buffer = bytearray()
        self._key = None
        fd, path = self._fd, self._path
        self._fd = self._path = None
        if fd is not None:
            os.close(fd)
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _read_record(fd: int, offset: int) -> tuple[bytes, int]:
    """The sealed chunk at ``offset`` and the offset after it; a short read is a cut file."""
    header = os.pread(fd, _LENGTH.size, offset)
    if len(header) != _LENGTH.size:
        raise SpoolIntegrityError
    (length,) = _LENGTH.unpack(header)
    if length > _MAX_SEALED:  # never allocate what a corrupted length field asks for
        raise SpoolIntegrityError
    sealed = os.pread(fd, length, offset + _LENGTH.size)
    if len(sealed) != length:
        raise SpoolIntegrityError
    return sealed, offset + _LENGTH.size + length


class EncryptedSpoolFactory:
    """Creates :class:`EncryptedSpool` instances (``SPOOL_MEMORY_BYTES``, §9.1)."""

    def __init__(self, memory_bytes: int, directory: str | None = None) -> None:
        self._memory_bytes = memory_bytes
        self._directory = directory

    def create(self) -> EncryptedSpool:
        return EncryptedSpool(self._memory_bytes, self._directory)
