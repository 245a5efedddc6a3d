"""Every value encoding of §5.3, row by row against the canonical dataset."""

from __future__ import annotations

from tests.contract.conftest import Harness
from tests.contract.dataset import ITEM_ROWS, ITEMS


async def test_every_value_of_every_family(harness: Harness) -> None:
    cat = harness.engine.catalog_name
    spec = harness.loaded.dataset.items
    document = await harness.extract({cat(ITEMS): ["*"]}, batch_size=7)
    rows = document[cat(ITEMS)]
    assert len(rows) == ITEM_ROWS
    by_id = {row[cat("id")]: row for row in rows}
    mismatches = []
    for source in spec.rows:
        got = by_id[source["id"]]
        assert sorted(got) == sorted(cat(c.name) for c in spec.columns)
        for column in spec.columns:
            want = harness.engine.expected(column, source[column.name])
            if got[cat(column.name)] != want or type(got[cat(column.name)]) is not type(want):
                mismatches.append((source["id"], column.name, got[cat(column.name)], want))
    assert mismatches == []


async def test_nulls_come_back_as_null_in_every_nullable_column(harness: Harness) -> None:
    cat = harness.engine.catalog_name
    spec = harness.loaded.dataset.items
    document = await harness.extract({cat(ITEMS): ["*"]})
    nulls = {
        (row[cat("id")], column.name)
        for row in document[cat(ITEMS)]
        for column in spec.columns
        if row[cat(column.name)] is None
    }
    want = {
        (source["id"], column.name)
        for source in spec.rows
        for column in spec.columns
        if source[column.name] is None
    }
    assert nulls == want
    assert {name for _, name in want} == {c.name for c in spec.columns if c.nullable}
