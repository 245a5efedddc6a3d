"""§13 "Files": local result objects are created 0600 and the directories the store creates
for them 0700, whatever the umask; existing directories keep their mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from fetcher.adapters.objectstore.local import (
    LocalObjectStore,
    create_private_file,
    make_private_dirs,
)

KEY = "prefix/external-data/0190a1b2-0000-7000-8000-000000000001.json"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture(params=[0o000, 0o022, 0o277], ids=["umask000", "umask022", "umask277"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


async def test_objects_are_0600_in_new_directories_0700(tmp_path: Path, umask: int) -> None:
    existing = tmp_path / "existing"
    existing.mkdir()
    existing.chmod(0o751)
    store = LocalObjectStore(str(existing / "objects"))
    async with store.open_writer(KEY) as writer:
        await writer.write(b"stored bytes")
    path = store.path_for(KEY)
    assert path.read_bytes() == b"stored bytes"
    assert _mode(path) == 0o600
    created = [existing / "objects", existing / "objects" / "prefix", path.parent]
    assert [_mode(d) for d in created] == [0o700] * 3
    assert _mode(existing) == 0o751


async def test_the_readiness_probe_creates_its_root_0700(tmp_path: Path, umask: int) -> None:
    store = LocalObjectStore(str(tmp_path / "a" / "b"))
    await store.check()
    assert _mode(tmp_path / "a") == 0o700
    assert _mode(tmp_path / "a" / "b") == 0o700
    assert list((tmp_path / "a" / "b").iterdir()) == []


def test_make_private_dirs_leaves_existing_directories_alone(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    make_private_dirs(tmp_path)
    make_private_dirs(tmp_path / "x")
    make_private_dirs(tmp_path / "x")
    assert _mode(tmp_path) == 0o755
    assert _mode(tmp_path / "x") == 0o700


def test_create_private_file_refuses_an_existing_file_and_a_link(tmp_path: Path) -> None:
    (tmp_path / "taken").write_bytes(b"")
    with pytest.raises(FileExistsError):
        create_private_file(tmp_path / "taken")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(FileExistsError):
        create_private_file(tmp_path / "link")
    assert not (tmp_path / "target").exists()
