"""Result spools that move to disk only encrypted (contract §4.3.1).

A spool keeps up to ``memory_bytes`` in memory. Past that, everything (the buffered bytes
first) goes to a temporary file created with ``O_EXCL`` and mode 0600, each chunk sealed with
AES-256-GCM under an ephemeral per-job key (fresh nonce per chunk) that lives only in memory.
No plaintext result byte ever touches disk. ``close`` removes the file and forgets the key on
every exit path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
import tempfile
from collections.abc import AsyncIterator

from fetcher.crypto import new_ephemeral_key, open_chunk, seal_chunk

__all__ = ["EncryptedSpool", "EncryptedSpoolFactory"]

_LENGTH = struct.Struct(">I")
#: Plaintext bytes sealed per disk record; reads come back in records of this size.
RECORD_BYTES = 1024 * 1024


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

    def __repr__(self) -> str:
        return f"EncryptedSpool(size={self._size}, on_disk={self._path is not None})"

    @property
    def size(self) -> int:
        return self._size

    async def write(self, data: bytes) -> None:
        self._buffer += data
        self._size += len(data)
        if self._fd is None and len(self._buffer) <= self._memory_bytes:
            return
        if len(self._buffer) >= RECORD_BYTES or self._fd is None:
            await asyncio.to_thread(self._flush, False)

    def _open_file(self) -> int:
        self._key = new_ephemeral_key()
        fd, path = tempfile.mkstemp(prefix="fetcher-spool-", dir=self._directory)  # O_EXCL, 0600
        self._path = path
        return fd

    def _flush(self, final: bool) -> None:
        if self._fd is None:
            self._fd = self._open_file()
        assert self._key is not None
        while len(self._buffer) >= RECORD_BYTES or (final and self._buffer):
            record = bytes(self._buffer[:RECORD_BYTES])
            del self._buffer[:RECORD_BYTES]
            sealed = seal_chunk(self._key, record)
            os.write(self._fd, _LENGTH.pack(len(sealed)) + sealed)

    async def read(self) -> AsyncIterator[bytes]:
        if self._fd is None:
            if self._buffer:
                yield bytes(self._buffer)
            return
        await asyncio.to_thread(self._flush, True)
        assert self._path is not None
        assert self._key is not None
        with open(self._path, "rb") as handle:  # noqa: ASYNC230 - records are read in a thread below
            while True:
                header = await asyncio.to_thread(handle.read, _LENGTH.size)
                if not header:
                    return
                (length,) = _LENGTH.unpack(header)
                sealed = await asyncio.to_thread(handle.read, length)
                yield open_chunk(self._key, sealed)

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


class EncryptedSpoolFactory:
    """Creates :class:`EncryptedSpool` instances (``SPOOL_MEMORY_BYTES``, §9.1)."""

    def __init__(self, memory_bytes: int, directory: str | None = None) -> None:
        self._memory_bytes = memory_bytes
        self._directory = directory

    def create(self) -> EncryptedSpool:
        return EncryptedSpool(self._memory_bytes, self._directory)
