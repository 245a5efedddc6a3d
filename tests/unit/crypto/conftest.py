"""Shared §6.6 test-vector fixtures."""

from __future__ import annotations

import pytest

from fetcher.crypto import KeySet
from tests.unit.crypto.vectors import MASTER_KEY_TEXT


@pytest.fixture(scope="session")
def keys() -> KeySet:
    """The §6.6 key set."""
    return KeySet.from_text(MASTER_KEY_TEXT)
