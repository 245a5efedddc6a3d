"""§13 "Files": the SQLite metadata store and its ``-wal``/``-shm`` files are created 0600 and
the directories the store creates for them 0700, whatever the umask; existing directories and
files keep their mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.services.store_roles import StoreUnavailableError
from tests.unit.store.store_contract import connection


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o000, 0o022, 0o277], ids=["umask000", "umask022", "umask277"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process umask for one test: 000 would leave defaults wide open, 277 would strip
    the owner's write bit; the modes must come out the same under each."""
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


async def test_the_database_wal_and_shm_files_are_0600(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "metadata.db"
    async with SqliteMetadataStore(path) as store:
        await store.migrate()
        await store.insert_connection(connection("mode-check"))
        files = [path, path.with_name("metadata.db-wal"), path.with_name("metadata.db-shm")]
        assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
        assert await store.get_connection_by_name("mode-check", tenant="") is not None


async def test_missing_directories_are_created_0700_existing_ones_kept(
    tmp_path: Path, umask: int
) -> None:
    existing = tmp_path / "existing"
    existing.mkdir()
    existing.chmod(0o755)
    path = existing / "new" / "deeper" / "metadata.db"
    async with SqliteMetadataStore(path) as store:
        await store.migrate()
    assert _mode(existing) == 0o755
    assert _mode(existing / "new") == 0o700
    assert _mode(existing / "new" / "deeper") == 0o700
    assert _mode(path) == 0o600


async def test_an_existing_database_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "metadata.db"
    path.touch()
    path.chmod(0o640)
    async with SqliteMetadataStore(path) as store:
        await store.migrate()
    assert _mode(path) == 0o640


async def test_the_target_of_a_dangling_link_is_created_0600(tmp_path: Path) -> None:
    """SQLite follows a symbolic link at the path; the file it opens is still created 0600."""
    target = tmp_path / "data" / "elsewhere.db"
    (tmp_path / "metadata.db").symlink_to(target)
    async with SqliteMetadataStore(tmp_path / "metadata.db") as store:
        await store.migrate()
        assert _mode(target) == 0o600
        assert _mode(target.parent) == 0o700
        assert _mode(target.with_name("elsewhere.db-wal")) == 0o600


async def test_a_file_that_cannot_be_created_is_store_unavailable(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file, not a directory")
    store = SqliteMetadataStore(tmp_path / "blocker" / "sub" / "metadata.db")
    with pytest.raises(StoreUnavailableError):
        await store.open()
