"""Table keys and field matching through the engine (§3.2, §3.3): casing, qualification."""

from __future__ import annotations

import pytest

from fetcher.engine import EngineError, ErrorCategory
from tests.contract.conftest import Harness
from tests.contract.dataset import EMPTY, INJECTION_COLUMN, INJECTION_TABLE, ITEM_ROWS, ITEMS


def _swap_case(name: str) -> str:
    return name.swapcase()


async def test_unqualified_key_and_catalog_row_keys(harness: Harness) -> None:
    items = harness.engine.catalog_name(ITEMS)
    fields = [harness.engine.catalog_name(n) for n in ("id", "MixedCol")]
    document = await harness.extract({items: fields})
    assert list(document) == [items]
    assert len(document[items]) == ITEM_ROWS
    assert all(sorted(row) == sorted(fields) for row in document[items])


async def test_default_schema_prefix_is_stripped_case_insensitively(harness: Harness) -> None:
    schema = harness.loaded.default_schema
    if schema is None:
        pytest.skip("this engine never splits table keys (§3.3)")
    items = harness.engine.catalog_name(ITEMS)
    document = await harness.extract({f"{_swap_case(schema)}.{items}": ["*"]})
    assert list(document) == [items]
    assert len(document[items]) == ITEM_ROWS


async def test_table_and_field_casing(harness: Harness) -> None:
    items = harness.engine.catalog_name(ITEMS)
    mixed = harness.engine.catalog_name("MixedCol")
    if harness.engine.case_insensitive_names:
        document = await harness.extract({_swap_case(items): [_swap_case(mixed)]})
        [rows] = document.values()
        assert len(rows) == ITEM_ROWS
        assert all(list(row) == [mixed] for row in rows), "row keys are the catalog spelling"
        return
    with pytest.raises(EngineError) as caught:
        await harness.extract({items: [_swap_case(mixed)]})
    assert f"unknown fields for table '{items}' in datasource '{harness.ds}'" in str(caught.value)
    with pytest.raises(EngineError) as caught:
        await harness.extract({_swap_case(items): ["*"]})
    assert f"table '{_swap_case(items)}' not found" in str(caught.value)


async def test_unknown_fields_are_all_listed(harness: Harness) -> None:
    items = harness.engine.catalog_name(ITEMS)
    with pytest.raises(EngineError) as caught:
        await harness.extract({items: ["nope_one", harness.engine.catalog_name("id"), "nope_two"]})
    assert caught.value.category is ErrorCategory.VALIDATION
    assert "nope_one, nope_two" in str(caught.value)


async def test_missing_table_is_not_found(harness: Harness) -> None:
    with pytest.raises(EngineError) as caught:
        await harness.extract({harness.engine.catalog_name("contract_missing"): ["*"]})
    assert "not found in datasource" in str(caught.value)


async def test_injection_shaped_names_are_plain_identifiers(harness: Harness) -> None:
    table = harness.engine.catalog_name(INJECTION_TABLE)
    column = harness.engine.catalog_name(INJECTION_COLUMN)
    document = await harness.extract({table: [column]})
    assert sorted(str(row[column]) for row in document[table]) == sorted(
        str(row[INJECTION_COLUMN]) for row in harness.loaded.dataset.injection.rows
    )


async def test_empty_table_is_present_with_no_rows(harness: Harness) -> None:
    empty = harness.engine.catalog_name(EMPTY)
    items = harness.engine.catalog_name(ITEMS)
    document = await harness.extract({empty: ["*"], items: [harness.engine.catalog_name("id")]})
    assert document[empty] == []
    assert len(document[items]) == ITEM_ROWS
