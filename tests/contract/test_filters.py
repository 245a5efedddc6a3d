"""Every §3.4 operator narrows rows exactly like the Python reference over the dataset."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from fetcher.engine.types import TypeFamily
from tests.contract.conftest import Harness
from tests.contract.dataset import (
    HOSTILE,
    INJECTION_COLUMN,
    INJECTION_TABLE,
    ITEMS,
    reference_ids,
)

Conditions = Mapping[str, Mapping[str, list[object]]]

#: (case id, {field: {operator: [values]}}) over ``contract_items``.
CASES: list[tuple[str, Conditions]] = [
    ("int-eq-one", {"id": {"eq": [5]}}),
    ("int-eq-many", {"id": {"eq": [1, 2, 3]}}),
    ("int-eq-string", {"id": {"eq": ["7"]}}),
    ("int-eq-null", {"num_i": {"eq": [None]}}),
    ("int-eq-value-or-null", {"num_i": {"eq": [-93, None]}}),
    ("int-ne", {"num_i": {"ne": [-93, -86]}}),
    ("int-ne-null", {"num_i": {"ne": [None]}}),
    ("int-gt", {"num_i": {"gt": [100]}}),
    ("int-gte", {"num_i": {"gte": [110]}}),
    ("int-lt", {"num_i": {"lt": [0]}}),
    ("int-lte", {"num_i": {"lte": [-79]}}),
    ("int-between", {"num_i": {"between": [0, 150]}}),
    ("int-big", {"num_i": {"eq": [9007199254740993]}}),
    ("int-in", {"num_i": {"in": [-93, 5, 999]}}),
    ("int-in-null", {"num_i": {"in": [-93, None]}}),
    ("int-nin", {"num_i": {"nin": [-93, -86]}}),
    ("int-nin-null", {"num_i": {"nin": [-93, None]}}),
    ("mixed-case-column", {"MixedCol": {"gt": [80]}}),
    ("dec-eq", {"num_d": {"eq": [-186.89]}}),
    ("dec-eq-string", {"num_d": {"eq": ["-173.78"]}}),
    ("dec-gt", {"num_d": {"gt": ["-50.5"]}}),
    ("dec-between", {"num_d": {"between": [-100, 100.25]}}),
    ("float-lt", {"num_f": {"lt": [0]}}),
    ("float-gte", {"num_f": {"gte": [2.5]}}),
    ("float-eq", {"num_f": {"eq": [2.5]}}),
    ("bool-eq-true", {"flag": {"eq": [True]}}),
    ("bool-eq-string", {"flag": {"eq": ["false"]}}),
    ("bool-ne", {"flag": {"ne": [False]}}),
    ("bool-null", {"flag": {"eq": [None]}}),
    ("text-eq", {"txt": {"eq": ["item 20"]}}),
    ("text-eq-other-case", {"txt": {"eq": ["ITEM 20"]}}),
    ("text-eq-percent", {"txt": {"eq": ["100%"]}}),
    ("text-eq-empty", {"txt": {"eq": [""]}}),
    ("text-eq-placeholders", {"txt": {"eq": ["%s %(x)s"]}}),
    ("text-eq-hostile", {"txt": {"eq": [HOSTILE]}}),
    ("text-ne-hostile", {"txt": {"ne": [HOSTILE]}}),
    ("text-in-null", {"txt": {"in": ["a_b", "axb", None]}}),
    ("text-nin-null", {"txt": {"nin": ["O'Brien", None]}}),
    ("text-eq-number", {"txt": {"in": [7, "item 17"]}}),
    ("like-prefix", {"txt": {"like": ["item 1%"]}}),
    ("like-one-char", {"txt": {"like": ["item 2_"]}}),
    ("like-literal-percent", {"txt": {"like": ["100\\%"]}}),
    ("like-contains-percent", {"txt": {"like": ["%\\%%"]}}),
    ("like-literal-underscore", {"txt": {"like": ["a\\_b"]}}),
    ("like-literal-backslash", {"txt": {"like": ["back\\\\slash"]}}),
    ("like-quote", {"txt": {"like": ["%'%"]}}),
    ("like-anything", {"txt": {"like": ["%"]}}),
    ("like-emoji", {"txt": {"like": ["emoji _"]}}),
    ("date-eq", {"day": {"eq": ["2024-01-10"]}}),
    ("date-between", {"day": {"between": ["2024-01-05", "2024-01-20"]}}),
    ("date-gt", {"day": {"gt": ["2024-02-01"]}}),
    ("date-nin-null", {"day": {"nin": ["2024-01-02", None]}}),
    ("ts-eq", {"ts": {"eq": ["2024-01-02T04:00:21"]}}),
    ("ts-gt", {"ts": {"gt": ["2024-01-05T00:00:00"]}}),
    ("ts-lt-z", {"ts": {"lt": ["2024-01-03T12:00:00Z"]}}),
    ("ts-gte-offset", {"ts": {"gte": ["2024-01-05T02:00:00+02:00"]}}),
    ("ts-between-end-of-day", {"ts": {"between": ["2024-01-02", "2024-01-04"]}}),
    ("tstz-eq", {"tstz": {"eq": ["2023-06-01T22:00:07Z"]}}),
    ("tstz-gt-offset", {"tstz": {"gt": ["2023-06-10T00:00:00+05:00"]}}),
    ("tstz-between-end-of-day", {"tstz": {"between": ["2023-06-03", "2023-06-05"]}}),
    ("time-gt", {"tm": {"gt": ["12:00"]}}),
    ("time-between", {"tm": {"between": ["01:00:00", "05:30"]}}),
    ("time-eq-fraction", {"tm": {"eq": ["05:07:11.5"]}}),
    (
        "uuid-eq-upper",
        {"uid": {"eq": ["00000000-0000-0000-0003-000000000003".upper()]}},
    ),
    ("uuid-ne", {"uid": {"ne": ["00000000-0000-0000-0003-000000000003"]}}),
    ("combined-fields", {"num_i": {"gt": [0]}, "txt": {"like": ["item%"]}}),
    ("combined-operators", {"id": {"gte": [10], "lt": [20], "ne": [15]}}),
    ("matches-nothing", {"id": {"gt": [1000]}}),
]


@pytest.mark.parametrize("conditions", [c for _, c in CASES], ids=[i for i, _ in CASES])
async def test_filter_matches_reference(harness: Harness, conditions: Conditions) -> None:
    items = harness.loaded.dataset.items
    names = {c.name for c in items.columns}
    missing = sorted(set(conditions) - names)
    if missing:
        pytest.skip(f"{harness.engine.name} has no family for {missing}")
    cat = harness.engine.catalog_name
    filters = {cat(ITEMS): {cat(field): dict(ops) for field, ops in conditions.items()}}
    document = await harness.extract({cat(ITEMS): [cat("id")]}, filters)
    got = {int(str(row[cat("id")])) for row in document[cat(ITEMS)]}
    assert got == reference_ids(items, conditions, harness.engine.collation)


async def test_reference_cases_are_not_trivial() -> None:
    """Guard against a dataset change that makes the cases meaningless: most cases keep some
    rows and drop others on an engine with every family."""
    from tests.contract.dataset import Collation, build_dataset

    items = build_dataset(frozenset(TypeFamily)).items
    narrowing = [
        case_id
        for case_id, conditions in CASES
        if 0 < len(reference_ids(items, conditions, Collation())) < len(items.rows)
    ]
    assert len(narrowing) >= len(CASES) - 2


async def test_injection_shaped_value_on_injection_shaped_column(harness: Harness) -> None:
    table = harness.engine.catalog_name(INJECTION_TABLE)
    column = harness.engine.catalog_name(INJECTION_COLUMN)
    id_ = harness.engine.catalog_name("id")
    for value, want in (("x' OR '1'='1", {1}), ("%s", {2}), ("' OR ''='", set())):
        document = await harness.extract({table: [id_]}, {table: {column: {"eq": [value]}}})
        assert {int(str(row[id_])) for row in document[table]} == want, value
