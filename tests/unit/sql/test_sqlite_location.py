"""§2.5.1: the SQLite location rules run again before every open; failures say nothing more."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fetcher.adapters.sql.sqlite import LOCATION_DETAIL, SqliteConnector
from fetcher.engine.errors import EngineError, ErrorCategory
from tests.unit.sql.helpers import build_database, descriptor


async def open_and_probe(
    path: Path | str, allowed: Path | None, forbidden: tuple[str, ...] = ()
) -> None:
    connector = SqliteConnector(
        descriptor(path),
        allowed_dir=str(allowed) if allowed is not None else None,
        forbidden_paths=forbidden,
    )
    async with connector as conn:
        await conn.probe()


async def assert_rejected(
    path: Path | str, allowed: Path | None, forbidden: tuple[str, ...] = ()
) -> None:
    with pytest.raises(EngineError) as caught:
        await open_and_probe(path, allowed, forbidden)
    error = caught.value
    assert error.category is ErrorCategory.CONNECT
    assert error.message == "failed to connect to datasource 'local'"
    assert error.detail == LOCATION_DETAIL
    assert str(path) not in error.text()


async def test_file_inside_allowed_dir_opens(database: Path, allowed_dir: Path) -> None:
    await open_and_probe(database, allowed_dir)


async def test_special_characters_in_the_path_are_percent_encoded(allowed_dir: Path) -> None:
    path = allowed_dir / "we?ird #name% 1.db"
    build_database(path)
    await open_and_probe(path, allowed_dir)


async def test_no_allowed_dir_accepts_any_absolute_path(database: Path) -> None:
    await open_and_probe(database, None)


def relative_to_cwd(path: Path) -> str:
    return os.path.relpath(path)


async def test_relative_path_is_rejected(database: Path, allowed_dir: Path) -> None:
    relative = relative_to_cwd(database)
    await assert_rejected(relative, allowed_dir)
    await assert_rejected(relative, None)


async def test_outside_allowed_dir_is_rejected(tmp_path: Path, allowed_dir: Path) -> None:
    outside = tmp_path / "outside.db"
    build_database(outside)
    await assert_rejected(outside, allowed_dir)
    await assert_rejected(allowed_dir / ".." / "outside.db", allowed_dir)


async def test_missing_and_unreadable_files_look_the_same(
    tmp_path: Path, allowed_dir: Path
) -> None:
    await assert_rejected(allowed_dir / "missing.db", allowed_dir)
    await assert_rejected(allowed_dir, allowed_dir)  # the directory itself
    sub = allowed_dir / "sub"
    sub.mkdir()
    await assert_rejected(sub, allowed_dir)  # a directory
    text = allowed_dir / "notes.txt"
    text.write_text("not a database")
    await assert_rejected(text, allowed_dir)
    empty = allowed_dir / "empty.db"
    empty.touch()
    await assert_rejected(empty, allowed_dir)


async def test_symlink_leaving_the_allowed_dir_is_rejected(
    tmp_path: Path, allowed_dir: Path
) -> None:
    outside = tmp_path / "outside.db"
    build_database(outside)
    link = allowed_dir / "link.db"
    link.symlink_to(outside)
    await assert_rejected(link, allowed_dir)


async def test_symlink_as_last_component_is_rejected_even_inside_the_allowed_dir(
    database: Path, allowed_dir: Path
) -> None:
    # §2.5.1 (version 2): the last component must not be a symbolic link.
    link = allowed_dir / "alias.db"
    link.symlink_to(database)
    await assert_rejected(link, allowed_dir)


async def test_symlinked_directory_inside_the_allowed_dir_is_followed(
    allowed_dir: Path,
) -> None:
    real_sub = allowed_dir / "real"
    real_sub.mkdir()
    build_database(real_sub / "x.db")
    (allowed_dir / "alias").symlink_to(real_sub)
    await open_and_probe(allowed_dir / "alias" / "x.db", allowed_dir)


async def test_recheck_catches_a_file_swapped_for_a_symlink(
    tmp_path: Path, allowed_dir: Path
) -> None:
    path = allowed_dir / "swap.db"
    build_database(path)
    await open_and_probe(path, allowed_dir)
    outside = tmp_path / "secret.db"
    shutil.move(path, outside)
    path.symlink_to(outside)
    await assert_rejected(path, allowed_dir)


async def test_metadata_store_file_is_always_rejected(database: Path, allowed_dir: Path) -> None:
    await assert_rejected(database, allowed_dir, (str(database),))
    await assert_rejected(database, None, (str(database),))
    hard_link = allowed_dir / "hard.db"
    os.link(database, hard_link)
    await assert_rejected(hard_link, allowed_dir, (str(database),))


def set_mode(path: Path, mode: int) -> None:
    path.chmod(mode)


async def test_unreadable_file_is_rejected(database: Path, allowed_dir: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    set_mode(database, 0)
    try:
        await assert_rejected(database, allowed_dir)
    finally:
        set_mode(database, 0o600)
