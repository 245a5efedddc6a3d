"""The §2.5.1 location rule of ``SQLITE`` connections: the one validation rule that reads the
file system. Connection validation applies it to a new ``databaseName``; hosts call it again
before every open (the re-check row), so a file swapped for a symbolic link later is refused."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

__all__ = ["SqlitePolicy", "sqlite_location_ok"]

_SQLITE_HEADER = b"SQLite format 3\x00"


def sqlite_location_ok(
    path: str, *, allowed_dir: str, metadata_store_path: str | None = None
) -> bool:
    """§2.5.1 location rules: an absolute path whose realpath lies inside
    ``realpath(allowed_dir)`` and names a regular, readable SQLite file that is not the metadata
    store's own file; its last component is not a symbolic link (version 2, §13)."""
    if not os.path.isabs(path) or os.path.islink(path):
        return False
    try:
        real = os.path.realpath(path)
        base = os.path.realpath(allowed_dir)
        if real == base or os.path.commonpath([real, base]) != base:
            return False
        info = os.stat(real)
        if not stat.S_ISREG(info.st_mode) or _is_metadata_store(info, metadata_store_path):
            return False
        with open(real, "rb") as handle:
            return handle.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except (OSError, ValueError):
        return False


@dataclass(frozen=True, slots=True)
class SqlitePolicy:
    """Where ``SQLITE`` connections may point (§2.5.1): only in embedded mode, inside
    ``allowed_dir`` (``SQLITE_ALLOWED_DIR``), never the metadata store's own file."""

    embedded: bool = False
    allowed_dir: str | None = None
    metadata_store_path: str | None = None

    def allows(self, path: str) -> bool:
        """The §2.5.1 re-check before every open of a stored ``SQLITE`` connection."""
        allowed = self.allowed_dir
        return (
            self.embedded
            and allowed is not None
            and sqlite_location_ok(
                path, allowed_dir=allowed, metadata_store_path=self.metadata_store_path
            )
        )


def _is_metadata_store(info: os.stat_result, metadata_store_path: str | None) -> bool:
    """§2.5.1: the metadata store's own file, by path or by inode (hard links included)."""
    if not metadata_store_path:
        return False
    try:
        store = os.stat(os.path.realpath(metadata_store_path))
    except (OSError, ValueError):
        return False
    return (store.st_dev, store.st_ino) == (info.st_dev, info.st_ino)
