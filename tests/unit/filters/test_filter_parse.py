"""Parsing of ``dataRequest.filters`` (contract §3.4, §3.6 step 12)."""

from __future__ import annotations

import pytest

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import Condition, FieldFilter, Operator
from fetcher.engine.filters.parse import (
    FilterReferenceError,
    LikeToken,
    LikeTokenKind,
    check_table_value_count,
    count_filter_values,
    like_tokens,
    parse_filters,
)

MAPPED = {"pg": {"accounts": ["id"]}, "mongo": {"tx": ["*"]}}


def fail(raw: object) -> EngineError:
    with pytest.raises(EngineError) as info:
        parse_filters(raw, MAPPED)
    assert info.value.category is ErrorCategory.VALIDATION
    return info.value


def one(field_filter: object) -> dict[str, object]:
    return {"pg": {"accounts": {"f": field_filter}}}


@pytest.mark.parametrize("raw", [None, {}])
def test_empty(raw: object) -> None:
    assert dict(parse_filters(raw, MAPPED)) == {}


def test_contract_example() -> None:
    raw = {
        "pg": {
            "accounts": {
                "status": {"eq": ["active"]},
                "created_at": {"between": ["2026-01-01", "2026-01-31"]},
            }
        }
    }
    spec = parse_filters(raw, MAPPED)
    assert spec["pg"]["accounts"] == (
        FieldFilter("status", (Condition(Operator.EQ, ("active",)),)),
        FieldFilter("created_at", (Condition(Operator.BETWEEN, ("2026-01-01", "2026-01-31")),)),
    )


def test_every_operator_and_scalar_kind_is_kept_in_order() -> None:
    raw = one(
        {
            "eq": ["a", 1, 1.5, True, None],
            "ne": [None],
            "gt": [1],
            "gte": ["x"],
            "lt": [False],
            "lte": [2.5],
            "between": [1, 2],
            "in": [1],
            "nin": ["a", None],
            "like": ["a%"],
        }
    )
    conditions = parse_filters(raw, MAPPED)["pg"]["accounts"][0].conditions
    assert [c.op for c in conditions] == list(Operator)
    assert conditions[0].values == ("a", 1, 1.5, True, None)
    assert conditions[0].values[3] is True


def test_empty_tables_and_datasources_are_dropped() -> None:
    spec = parse_filters({"pg": {"accounts": {}}, "mongo": {}}, MAPPED)
    assert dict(spec) == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "filters must be an object"),
        ("x", "filters must be an object"),
        ({"pg": []}, "filters for datasource 'pg' must be an object"),
        ({"pg": None}, "filters for datasource 'pg' must be an object"),
        ({"pg": {"t": 1}}, "filters for table 't' in datasource 'pg' must be an object"),
        (one(["eq"]), "filter for field 'f' must be an object of operators"),
        (one(None), "filter for field 'f' must be an object of operators"),
        (one({}), "filter for field 'f' must have at least one operator"),
        (one({"EQ": [1]}), "unknown filter operator 'EQ' for field 'f'"),
        (one({"contains": [1]}), "unknown filter operator 'contains' for field 'f'"),
        (one({"eq": 1}), "eq operator for field 'f' must have an array of values"),
        (one({"in": None}), "in operator for field 'f' must have an array of values"),
        (
            one({"eq": [{"a": 1}]}),
            "eq operator for field 'f' must have only scalar values (string, number, boolean "
            "or null)",
        ),
        (
            one({"in": [1, [2]]}),
            "in operator for field 'f' must have only scalar values (string, number, boolean "
            "or null)",
        ),
        (one({"eq": []}), "eq operator for field 'f' must have at least 1 value, got 0"),
        (one({"ne": []}), "ne operator for field 'f' must have at least 1 value, got 0"),
        (one({"in": []}), "in operator for field 'f' must have at least 1 value, got 0"),
        (one({"nin": []}), "nin operator for field 'f' must have at least 1 value, got 0"),
        (one({"gt": []}), "gt operator for field 'f' must have exactly 1 value, got 0"),
        (one({"gte": [1, 2]}), "gte operator for field 'f' must have exactly 1 value, got 2"),
        (one({"lt": [1, 2]}), "lt operator for field 'f' must have exactly 1 value, got 2"),
        (one({"lte": []}), "lte operator for field 'f' must have exactly 1 value, got 0"),
        (one({"like": []}), "like operator for field 'f' must have exactly 1 value, got 0"),
        (
            one({"between": [1]}),
            "between operator for field 'f' must have exactly 2 values, got 1",
        ),
        (
            one({"between": [1, 2, 3]}),
            "between operator for field 'f' must have exactly 2 values, got 3",
        ),
        (one({"gt": [None]}), "gt operator for field 'f' does not allow null values"),
        (one({"gte": [None]}), "gte operator for field 'f' does not allow null values"),
        (one({"lt": [None]}), "lt operator for field 'f' does not allow null values"),
        (one({"lte": [None]}), "lte operator for field 'f' does not allow null values"),
        (
            one({"between": [1, None]}),
            "between operator for field 'f' does not allow null values",
        ),
        (one({"like": [None]}), "like operator for field 'f' does not allow null values"),
        (one({"like": [5]}), "like operator for field 'f' must have a string pattern"),
        (one({"like": [True]}), "like operator for field 'f' must have a string pattern"),
        (
            one({"like": ["x" * 257]}),
            "like operator for field 'f' must have a pattern of at most 256 characters",
        ),
    ],
)
def test_shape_errors(raw: object, message: str) -> None:
    error = fail(raw)
    assert error.message == message
    assert not isinstance(error, FilterReferenceError)


def test_like_pattern_of_256_characters_passes() -> None:
    spec = parse_filters(one({"like": ["x" * 256]}), MAPPED)
    assert spec["pg"]["accounts"][0].conditions[0].values == ("x" * 256,)


@pytest.mark.parametrize("op", ["eq", "ne", "in", "nin"])
def test_operator_value_cap(op: str) -> None:
    ok = parse_filters(one({op: list(range(1000))}), MAPPED)
    assert len(ok["pg"]["accounts"][0].conditions[0].values) == 1000
    error = fail(one({op: list(range(1001))}))
    assert error.message == f"{op} operator for field 'f' must have at most 1000 values, got 1001"


def test_table_value_cap_at_the_boundary() -> None:
    fields: dict[str, dict[str, list[object]]] = {
        f"f{i}": {"in": list(range(1000))} for i in range(2)
    }
    assert count_filter_values(parse_filters({"pg": {"t": fields}}, MAPPED)["pg"]["t"]) == 2000
    fields["g"] = {"eq": [None]}
    assert fail({"pg": {"t": fields}}).message == "too many filter values for 'pg.t'"


def test_table_value_cap_counts_per_table_key_not_per_datasource() -> None:
    raw = {"pg": {"a": {"f": {"in": list(range(1000))}}, "b": {"f": {"in": list(range(1000))}}}}
    raw["pg"]["a"]["g"] = {"in": list(range(1000))}
    spec = parse_filters(raw, MAPPED)
    assert set(spec["pg"]) == {"a", "b"}


def test_table_value_cap_is_checked_after_the_table_fields() -> None:
    fields: dict[str, object] = {f"f{i}": {"in": list(range(1000))} for i in range(3)}
    fields["z"] = {"bogus": [1]}
    assert fail({"pg": {"t": fields}}).message == "unknown filter operator 'bogus' for field 'z'"


def test_check_table_value_count_helper() -> None:
    filters = (FieldFilter("f", (Condition(Operator.IN, tuple(range(2001))),)),)
    with pytest.raises(EngineError, match=r"too many filter values for 'ds\.T'"):
        check_table_value_count("ds", "T", filters)
    check_table_value_count("ds", "T", (FieldFilter("f", (Condition(Operator.IN, (1,) * 2000),)),))


def test_unknown_datasource_reference() -> None:
    with pytest.raises(FilterReferenceError) as info:
        parse_filters({"nope": {"t": {"f": {"eq": [1]}}}}, MAPPED)
    assert info.value.category is ErrorCategory.VALIDATION
    assert info.value.message == (
        "filter references unknown datasource 'nope' not found in mappedFields"
    )


def test_several_unknown_datasources_are_sorted_and_joined() -> None:
    raw = {"zeta": {}, "pg": {}, "alpha": {"t": {"f": {"eq": [1]}}}, "Beta": {}}
    with pytest.raises(FilterReferenceError) as info:
        parse_filters(raw, MAPPED)
    assert info.value.message == (
        "filter references unknown datasource 'Beta' not found in mappedFields; "
        "filter references unknown datasource 'alpha' not found in mappedFields; "
        "filter references unknown datasource 'zeta' not found in mappedFields"
    )


def test_shape_errors_come_before_reference_errors() -> None:
    error = fail({"nope": {"t": {"f": {"eq": []}}}})
    assert not isinstance(error, FilterReferenceError)
    assert error.message == "eq operator for field 'f' must have at least 1 value, got 0"


def test_first_failure_in_request_order_wins() -> None:
    raw = one({"gt": [], "bogus": [1]})
    assert fail(raw).message == "gt operator for field 'f' must have exactly 1 value, got 0"


def test_result_is_read_only() -> None:
    spec = parse_filters(one({"eq": [1]}), MAPPED)
    with pytest.raises(TypeError):
        spec["x"] = {}  # type: ignore[index]


L = LikeTokenKind.LITERAL


@pytest.mark.parametrize(
    ("pattern", "tokens"),
    [
        ("", ()),
        ("a%", (LikeToken(L, "a"), LikeToken(LikeTokenKind.ANY_RUN))),
        ("_", (LikeToken(LikeTokenKind.ANY_ONE),)),
        (r"\%\_\\", (LikeToken(L, "%"), LikeToken(L, "_"), LikeToken(L, "\\"))),
        (r"\a", (LikeToken(L, "a"),)),
        ("x\\", (LikeToken(L, "x"), LikeToken(L, "\\"))),
    ],
)
def test_like_tokens(pattern: str, tokens: tuple[LikeToken, ...]) -> None:
    assert like_tokens(pattern) == tokens
