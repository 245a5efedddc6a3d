"""Temporary PEM files for drivers that read TLS material only from paths (contract §11.2).

§11.2: created with ``O_EXCL`` (and ``O_NOFOLLOW``) and mode 0600, in a tmpfs directory when
one is usable (``/dev/shm``), and unlinked in a ``finally`` block right after connect. One
helper for every connector that needs it, so the rule cannot drift between engines.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress

__all__ = ["pem_files"]


def _secret_dir() -> str:
    """A tmpfs directory when one is usable (``/dev/shm``), else the system temp directory."""
    shm = "/dev/shm"  # noqa: S108 - tmpfs on purpose (§11.2); files are O_EXCL and 0600
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


@contextmanager
def pem_files(*pems: str) -> Iterator[list[str]]:
    """Each PEM in a fresh 0600 file, the paths in the same order; all unlinked on exit, also
    when writing one of them fails."""
    paths: list[str] = []
    try:
        for pem in pems:
            path = os.path.join(_secret_dir(), f"fetcher-{secrets.token_hex(16)}.pem")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(path, flags, 0o600)
            paths.append(path)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(pem)
        yield paths
    finally:
        for path in paths:
            with suppress(FileNotFoundError):
                os.unlink(path)
