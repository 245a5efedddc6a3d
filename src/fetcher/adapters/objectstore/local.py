"""The embedded local result store: ``<OBJECT_STORAGE_LOCAL_DIR>/<object key>`` (contract §6.3).

A write goes to a temporary file in the target directory (created with ``O_EXCL``, mode 0600),
is fsynced, and is renamed into place only when the writer block exits cleanly; on an exception
or a cancellation the temporary file (and any object at the key) is removed, so nothing remains
at the key (§4.3 step 5).
Writes of the (≤ ~1 MiB) chunks are small synchronous ``os.write`` calls; the fsync and rename
run in a worker thread that is always awaited to completion, so a cancellation can never race
the cleanup. ``check`` is the §2.10 readiness probe (the directory is writable).

A result object (up to 256 MiB) is written once and read rarely, so the writer keeps only about
two windows of it in the page cache (:data:`RELEASE_WINDOW`): each full window is advised
``POSIX_FADV_DONTNEED``, which starts its writeback, and one window later the same advice drops
its pages, clean by then if the disk kept up; after the fsync the whole file is advised once
more. The object does not push other data out of the cache, the final fsync has little left to
write, and the writes reuse the same few pages instead of taking fresh ones for every megabyte
(on this project's VMs a fresh page costs more than the copy into it: docs/performance.md,
"The local store's page cache"). It is advice only: where it is not supported, or fails, the
write goes on as before and the fsync still writes everything.

§13 "Files": objects are created 0600 and the directories this process creates for them 0700,
whatever the umask (the mode is set explicitly right after creation); directories that already
exist are left as they are. :func:`make_private_dirs` is shared with the SQLite metadata store.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from fetcher.engine import EngineError, ErrorCategory
from fetcher.services.infrastructure import ObjectWriter

__all__ = ["LocalObjectStore", "create_private_file", "make_private_dirs", "map_local_errors"]

_T = TypeVar("_T")

#: §4.3 step 5: the fixed part of every write failure.
STORE_FAILED = "failed to store result"
READ_FAILED = "failed to read result"
NOT_FOUND = "result object not found"
CHECK_FAILED = "object storage is not writable"

_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
#: Bytes between two page-cache advices of a written object (see the module docstring).
RELEASE_WINDOW = 8 << 20
_FADVISE = getattr(os, "posix_fadvise", None)
_DONTNEED = getattr(os, "POSIX_FADV_DONTNEED", 0)
#: Bytes per chunk of a streamed read (§14.2).
READ_CHUNK = 256 * 1024
#: §13 "Files".
FILE_MODE = 0o600
DIR_MODE = 0o700


def make_private_dirs(path: str | os.PathLike[str]) -> None:
    """Create ``path`` and its missing parents with mode 0700 (§13 "Files").

    The umask can only remove bits from the ``mkdir`` mode, so a new directory is never more
    open than 0700 even for an instant; ``fchmod`` then makes it exactly 0700. Directories that
    already exist, including ones another process creates meanwhile, are left as they are.
    """
    missing: list[Path] = []
    current = Path(path)
    while not current.exists() and current.parent != current:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            if directory.is_dir():
                continue
            raise
        fd = os.open(directory, _DIR_FLAGS)
        try:
            os.fchmod(fd, DIR_MODE)
        finally:
            os.close(fd)


def create_private_file(path: str | os.PathLike[str], flags: int = _OPEN_FLAGS) -> int:
    """``O_EXCL``-create ``path`` (never through a symbolic link) with mode exactly 0600."""
    fd = os.open(path, flags | _NOFOLLOW, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # the umask may have removed owner bits
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def map_local_errors(message: str = STORE_FAILED) -> Iterator[None]:
    """Translate file-system errors into ``EngineError(UNAVAILABLE, message, detail=…)``."""
    try:
        yield
    except EngineError:
        raise
    except (OSError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise EngineError(ErrorCategory.UNAVAILABLE, message, detail=detail) from exc


@contextlib.contextmanager
def _read_errors() -> Iterator[None]:
    """:func:`map_local_errors` for reads: a missing file becomes ``NOT_FOUND``."""
    try:
        with map_local_errors(READ_FAILED):
            yield
    except EngineError as exc:
        cause = exc.__cause__
        if isinstance(cause, OSError) and cause.errno in (errno.ENOENT, errno.ENOTDIR):
            raise EngineError(ErrorCategory.NOT_FOUND, NOT_FOUND) from cause
        raise


async def _in_thread(func: Callable[[], _T]) -> _T:
    """Run ``func`` in a thread and wait for it to finish even when cancelled meanwhile."""
    task = asyncio.ensure_future(asyncio.to_thread(func))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
        raise


class _TempObject:
    """One temporary file on its way to ``final``; tracks what cleanup must undo."""

    def __init__(self, final: Path) -> None:
        make_private_dirs(final.parent)
        self.final = final
        self.temp = final.with_name(f".{final.name}.{secrets.token_hex(8)}.tmp")
        self.fd: int | None = create_private_file(self.temp)  # the rename keeps the mode
        #: Bytes written so far, and where the last two page-cache advices began.
        self.size = 0
        self.advised = 0
        self.releasing = 0

    async def write(self, chunk: bytes) -> None:
        """Append ``chunk`` (the stored bytes) to the temporary file."""
        if self.fd is None:
            raise EngineError(ErrorCategory.UNAVAILABLE, STORE_FAILED, detail="writer is closed")
        view = memoryview(chunk)
        with map_local_errors():
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
                self.size += written
        if self.size - self.advised >= RELEASE_WINDOW:
            self._release_window()

    def _release_window(self) -> None:
        """Advise from the previous window to the end: the previous window's pages, written
        back since, are dropped; the new window's writeback starts."""
        self._dont_need(self.releasing)
        self.releasing, self.advised = self.advised, self.size

    def _dont_need(self, start: int) -> None:
        """``POSIX_FADV_DONTNEED`` from ``start`` to the end written so far (advice: never
        raises)."""
        if _FADVISE is not None and self.fd is not None:
            with contextlib.suppress(OSError):
                _FADVISE(self.fd, start, self.size - start, _DONTNEED)

    def commit(self) -> None:
        """fsync, close and rename into place; then fsync the directory (best effort)."""
        if self.fd is None:
            raise ValueError("writer is closed")
        os.fsync(self.fd)
        self._dont_need(0)  # all clean now: none of the object stays cached
        fd, self.fd = self.fd, None
        os.close(fd)
        os.replace(self.temp, self.final)
        with contextlib.suppress(OSError):
            directory = os.open(self.final.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)

    def discard(self) -> None:
        """Close and remove the temporary file and anything at the key (never raises).

        Like the S3 store, a failed write leaves no object at the key (the port's rule), even
        one an earlier write put there.
        """
        if self.fd is not None:
            fd, self.fd = self.fd, None
            with contextlib.suppress(OSError):
                os.close(fd)
        for target in (self.temp, self.final):
            with contextlib.suppress(OSError):
                target.unlink()


class LocalObjectStore:
    """``ObjectStore`` over a local directory (embedded mode without an S3 endpoint, §6.3)."""

    def __init__(self, root: str) -> None:
        self._root = Path(root)

    def __repr__(self) -> str:
        return f"LocalObjectStore(root={str(self._root)!r})"

    @property
    def root(self) -> Path:
        return self._root

    def path_for(self, key: str) -> Path:
        """The file for ``key``; keys that could leave the root are refused (``VALIDATION``)."""
        parts = key.split("/")
        bad = (
            not key
            or "\x00" in key
            or "\\" in key
            or key.startswith("/")
            or any(part in ("", ".", "..") for part in parts)
        )
        root = self._root.resolve()
        path = root.joinpath(*parts)
        if bad or not path.resolve().is_relative_to(root):
            raise EngineError(
                ErrorCategory.VALIDATION, "invalid object key", detail=f"refused key {key!r}"
            )
        return path

    @asynccontextmanager
    async def open_writer(self, key: str) -> AsyncIterator[ObjectWriter]:
        """Write the object at ``key``; it appears only when the block exits cleanly."""
        final = self.path_for(key)
        with map_local_errors():
            temp = _TempObject(final)
        committed = False
        try:
            yield temp
            with map_local_errors():
                await _in_thread(temp.commit)
            committed = True
        finally:
            if not committed:
                temp.discard()

    async def read(self, key: str) -> bytes:
        """The stored bytes at ``key``; a missing object raises ``NOT_FOUND``."""
        path = self.path_for(key)
        try:
            with map_local_errors(READ_FAILED):
                return await asyncio.to_thread(path.read_bytes)
        except EngineError as exc:
            cause = exc.__cause__
            if isinstance(cause, OSError) and cause.errno in (errno.ENOENT, errno.ENOTDIR):
                raise EngineError(ErrorCategory.NOT_FOUND, NOT_FOUND) from cause
            raise

    async def exists(self, key: str) -> bool:
        path = self.path_for(key)
        return await asyncio.to_thread(path.is_file)

    async def delete(self, key: str) -> None:
        path = self.path_for(key)
        with _read_errors():
            await asyncio.to_thread(path.unlink, missing_ok=True)

    async def size(self, key: str) -> int:
        """§14.2: the file's size; a missing object raises ``NOT_FOUND``."""
        path = self.path_for(key)
        with _read_errors():
            return (await asyncio.to_thread(path.stat)).st_size

    async def read_range(self, key: str, start: int, end: int) -> AsyncIterator[bytes]:
        """§14.2: bytes ``start``–``end`` (inclusive), read :data:`READ_CHUNK` at a time in a
        worker thread (a file read never blocks the event loop)."""
        path = self.path_for(key)
        with _read_errors():
            handle = await asyncio.to_thread(path.open, "rb")
        try:
            position, remaining = start, end - start + 1
            while remaining > 0:
                with _read_errors():
                    chunk = await asyncio.to_thread(
                        os.pread, handle.fileno(), min(READ_CHUNK, remaining), position
                    )
                if not chunk:
                    break
                position += len(chunk)
                remaining -= len(chunk)
                yield chunk
        finally:
            handle.close()

    async def check(self) -> None:
        """§2.10: the directory exists (created if needed) and a file can be created in it."""
        with map_local_errors(CHECK_FAILED):
            await asyncio.to_thread(self._probe)

    def _probe(self) -> None:
        make_private_dirs(self._root)
        probe = self._root / f".readyz.{secrets.token_hex(8)}.tmp"
        fd = create_private_file(probe)
        os.close(fd)
        probe.unlink()
