"""The previous release's writes on this release's PostgreSQL schema (a rollback,
docs/upgrades.md): the PostgreSQL half of tests/unit/store/test_rollback_safety.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fetcher.adapters.store.postgres import PostgresMetadataStore
from tests.conftest import _fresh_database
from tests.previous_release import write_postgres
from tests.unit.store.test_rollback_safety import assert_served, previous_release_kwargs

pytestmark = pytest.mark.integration


@pytest.fixture
def dsn() -> Iterator[str]:
    yield from _fresh_database("rollback")


async def test_the_previous_release_writes_on_this_schema_on_postgres(dsn: str) -> None:
    old = write_postgres(dsn, **previous_release_kwargs())
    async with PostgresMetadataStore(dsn, max_size=2) as store:
        assert await store.migrate() == []
        await assert_served(store, old)
