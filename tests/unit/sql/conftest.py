"""Fixtures for the SQLite connector tests: a temporary database in an allowed directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.sql.helpers import build_database


@pytest.fixture
def allowed_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "allowed"
    directory.mkdir()
    return directory


@pytest.fixture
def database(allowed_dir: Path) -> Path:
    path = allowed_dir / "sample db.sqlite"
    build_database(path)
    return path
