"""Discovery (§3.3, §11.3, §11.4): scope, system objects excluded, names and families."""

from __future__ import annotations

from fetcher.engine.types import DiscoveredSchema, TableSchema
from tests.contract.conftest import Harness
from tests.contract.dataset import EMPTY, INJECTION_TABLE, ITEMS, VIEW


async def _discover(h: Harness) -> DiscoveredSchema:
    scope = [h.loaded.default_schema] if h.loaded.default_schema is not None else []
    async with h.connector() as connector:
        return await connector.discover(scope)


def _by_name(found: DiscoveredSchema) -> dict[str, TableSchema]:
    return {table.name: table for table in found.tables}


async def test_every_dataset_table_and_view_is_discovered(harness: Harness) -> None:
    found = _by_name(await _discover(harness))
    for spec in harness.loaded.dataset.tables:
        assert harness.engine.catalog_name(spec.name) in found, spec.name


async def test_nothing_outside_the_scope_and_no_system_object_is_discovered(
    harness: Harness,
) -> None:
    found = await _discover(harness)
    expected = {harness.engine.catalog_name(t.name) for t in harness.loaded.dataset.tables}
    names = {table.name for table in found.tables}
    assert names == expected, "discovery returned exactly the dataset's objects"
    assert not names & set(harness.loaded.hidden_tables)
    scope = harness.loaded.default_schema
    if scope is not None:
        assert found.default_schema.casefold() == scope.casefold()
        assert {table.schema.casefold() for table in found.tables} == {scope.casefold()}


async def test_columns_keep_catalog_spelling_and_family(harness: Harness) -> None:
    found = _by_name(await _discover(harness))
    items = found[harness.engine.catalog_name(ITEMS)]
    got = [(column.name, column.family) for column in items.columns]
    dataset_items = harness.loaded.dataset.items
    want = [(harness.engine.catalog_name(c.name), c.family) for c in dataset_items.columns]
    assert sorted(got) == sorted(want)


async def test_empty_table_and_injection_shaped_names_are_present(harness: Harness) -> None:
    found = _by_name(await _discover(harness))
    empty = found[harness.engine.catalog_name(EMPTY)]
    # MongoDB samples documents: an empty collection lists only ``_id`` (§11.3).
    wanted = ("id",) if harness.loaded.default_schema is None else ("id", "label")
    assert [c.name for c in empty.columns] == [harness.engine.catalog_name(n) for n in wanted]
    injection = found[harness.engine.catalog_name(INJECTION_TABLE)]
    assert len(injection.columns) == 2
    if harness.loaded.dataset.view is not None:
        assert harness.engine.catalog_name(VIEW) in found
