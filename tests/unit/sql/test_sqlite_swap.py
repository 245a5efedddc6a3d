"""§2.5.1 / §2.9.1: a file swapped for a symbolic link *after* the location check is not read.

The swap is made deterministic by running it between the check and the open (the window an
attacker races for), through the connector's own ``check_location``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from fetcher.adapters.sql import sqlite as sqlite_module
from fetcher.adapters.sql.sqlite import LOCATION_DETAIL, CheckedFile, SqliteConnector
from fetcher.engine.errors import EngineError, ErrorCategory
from tests.unit.sql.helpers import build_database, descriptor


def swap_after_check(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    real_check = sqlite_module.check_location

    def check_then_swap(
        path: str, allowed_dir: str | None, forbidden: Sequence[str] = ()
    ) -> CheckedFile:
        checked = real_check(path, allowed_dir, forbidden)
        swap()
        return checked

    monkeypatch.setattr(sqlite_module, "check_location", check_then_swap)


def secret_database(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE secret (token TEXT)")
    db.execute("INSERT INTO secret VALUES ('outside-the-allowed-dir')")
    db.commit()
    db.close()


async def assert_refused(path: Path, allowed: Path) -> None:
    connector = SqliteConnector(descriptor(path), allowed_dir=str(allowed))
    with pytest.raises(EngineError) as caught:
        await connector.__aenter__()  # nothing to read: the open itself must fail
    await connector.__aexit__(None, None, None)
    assert caught.value.category is ErrorCategory.CONNECT
    assert caught.value.detail == LOCATION_DETAIL


async def test_file_swapped_for_a_symlink_after_the_check_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, allowed_dir: Path
) -> None:
    path = allowed_dir / "swap.db"
    build_database(path)
    outside = tmp_path / "secret.db"
    secret_database(outside)

    def swap() -> None:
        os.unlink(path)
        path.symlink_to(outside)

    swap_after_check(monkeypatch, swap)
    await assert_refused(path, allowed_dir)


async def test_directory_swapped_for_a_symlink_after_the_check_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, allowed_dir: Path
) -> None:
    sub = allowed_dir / "sub"
    sub.mkdir()
    build_database(sub / "x.db")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret_database(outside / "x.db")

    def swap() -> None:
        shutil.move(sub, allowed_dir / "moved")
        sub.symlink_to(outside)

    swap_after_check(monkeypatch, swap)
    await assert_refused(sub / "x.db", allowed_dir)


async def test_file_replaced_by_another_file_after_the_check_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, allowed_dir: Path
) -> None:
    # A hard link to an outside file renamed over the checked name: same name, other inode.
    path = allowed_dir / "swap.db"
    build_database(path)
    outside = tmp_path / "secret.db"
    secret_database(outside)

    def swap() -> None:
        os.link(outside, allowed_dir / "tmp.db")
        os.replace(allowed_dir / "tmp.db", path)

    swap_after_check(monkeypatch, swap)
    await assert_refused(path, allowed_dir)


async def test_fifo_in_place_of_the_file_does_not_hang(allowed_dir: Path) -> None:
    fifo = allowed_dir / "pipe.db"
    os.mkfifo(fifo)
    await assert_refused(fifo, allowed_dir)


async def test_an_unswapped_file_still_opens(
    monkeypatch: pytest.MonkeyPatch, database: Path, allowed_dir: Path
) -> None:
    swap_after_check(monkeypatch, lambda: None)  # the check wrapper itself changes nothing
    async with SqliteConnector(descriptor(database), allowed_dir=str(allowed_dir)) as conn:
        names = [t.name for t in (await conn.discover([])).tables]
    assert "Accounts" in names
