"""The one ``mappedFields`` walker and the count rules of both routes (§2.6.9, §3.2, §3.5)."""

from __future__ import annotations

import pytest

from fetcher.engine.mapped_fields import (
    JOB_COUNTS,
    VALIDATION_COUNTS,
    MappedFieldsChecks,
    first_mapped_fields_problem,
)

#: Datasource ``a`` has a table with three fields, ``b`` three tables.
TREE = {"a": {"t": ["f", "g", "h"]}, "b": {"t1": ["f"], "t2": ["f"], "t3": ["f"]}}


def test_walk_order_is_request_order() -> None:
    seen: list[str] = []

    def note(*parts: object) -> None:
        seen.append(":".join(str(p) for p in parts if not isinstance(p, dict | list)))

    checks = MappedFieldsChecks(
        tree=lambda _: note("tree"),
        datasource=lambda ds, _: note("ds", ds),
        table=lambda ds, table, _: note("table", ds, table),
        entry=lambda ds, table, entry: note("entry", ds, table, entry),
        table_done=lambda ds, table, _: note("table_done", ds, table),
        datasource_done=lambda ds, _: note("ds_done", ds),
    )
    assert first_mapped_fields_problem({"a": {"t": ["f", "g"], "u": []}, "b": {}}, checks) is None
    assert seen == [
        "tree",
        "ds:a",
        "table:a:t",
        "entry:a:t:f",
        "entry:a:t:g",
        "table_done:a:t",
        "table:a:u",
        "table_done:a:u",
        "ds_done:a",
        "ds:b",
        "ds_done:b",
    ]


def test_walk_stops_at_the_first_problem_and_skips_what_it_cannot_descend() -> None:
    checks = MappedFieldsChecks(
        entry=lambda ds, table, entry: f"{ds}.{table}.{entry}" if entry == "x" else None
    )
    assert (
        first_mapped_fields_problem({"a": {"t": ["f", "x", "x"]}, "b": {"t": ["x"]}}, checks)
        == "a.t.x"
    )
    assert first_mapped_fields_problem({"a": ["x"], "b": {"t": [1, "x"]}, "c": 3}, checks) is None
    assert (
        first_mapped_fields_problem({"a": ["x"], "b": {"t": [1, "x"]}, "c": {"u": ["x"]}}, checks)
        == "c.u.x"
    )
    assert first_mapped_fields_problem([{"a": {"t": ["x"]}}], checks) is None


def test_job_counts_each_datasource_in_turn() -> None:
    """§3.5 (Manager step 7 and the planner): ``a``'s fields before ``b``'s tables."""
    assert JOB_COUNTS.first_problem(TREE, 2, 2, 2) == (
        "Maximum 2 fields allowed per table, got 3 for 'a.t'"
    )
    assert JOB_COUNTS.first_problem(TREE, 1, 2, 2) == "Maximum 1 datasources allowed per job, got 2"
    assert JOB_COUNTS.first_problem(TREE, 2, 3, 3) is None


def test_validation_counts_every_table_count_before_any_field_count() -> None:
    """§2.6.9's check table: the table counts of the whole tree, then the field counts."""
    assert VALIDATION_COUNTS.first_problem(TREE, 2, 2, 2) == (
        "maximum 2 tables allowed per datasource, got 3 for 'b'"
    )
    assert VALIDATION_COUNTS.first_problem(TREE, 2, 3, 2) == (
        "maximum 2 fields allowed per table, got 3 for 'a.t'"
    )
    assert VALIDATION_COUNTS.first_problem(TREE, 1, 1, 1) == (
        "maximum 1 datasources allowed per validation request"
    )


@pytest.mark.parametrize("name", ["{ds}", "a'b", "{0}"])
def test_names_are_values_not_templates(name: str) -> None:
    assert JOB_COUNTS.tables_over(0, 1, name) == (
        f"Maximum 0 tables allowed per datasource, got 1 for '{name}'"
    )
    assert JOB_COUNTS.fields_over(1, 1, name, name) is None
