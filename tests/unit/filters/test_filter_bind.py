"""Binding filter values to column families (contract §3.4 "Values bound", §4.5, §11.4)."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time
from decimal import Decimal

import pytest

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import (
    BoundCondition,
    BoundFieldFilter,
    Condition,
    FieldFilter,
    Operator,
    Scalar,
)
from fetcher.engine.filters.bind import bind_field_filter, merge_field_filters
from fetcher.engine.types import Column, TypeFamily

F = TypeFamily
PREFIX = "invalid filter value for field 'f' of table 'public.t' in datasource 'ds': "


def bind(
    family: TypeFamily, op: Operator, *values: Scalar, like_any_family: bool = False
) -> BoundCondition:
    ff = FieldFilter("f", (Condition(op, values),))
    bound = bind_field_filter(
        "ds", "public.t", Column("f", family), ff, like_any_family=like_any_family
    )
    assert bound.column == Column("f", family)
    (condition,) = bound.conditions
    return condition


def bind_error(family: TypeFamily, op: Operator, *values: Scalar) -> str:
    with pytest.raises(EngineError) as info:
        bind(family, op, *values)
    assert info.value.category is ErrorCategory.VALIDATION
    return info.value.message


def one(family: TypeFamily, value: Scalar) -> object:
    return bind(family, Operator.EQ, value).values[0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, 5),
        (-7, -7),
        ("12", 12),
        ("+12", 12),
        ("1.0", 1),
        ("1e3", 1000),
        (2.0, 2),
        (1.5, Decimal("1.5")),
        ("-0.25", Decimal("-0.25")),
        (".5", Decimal("0.5")),
        ("1e999999999", Decimal("1e999999999")),
    ],
)
def test_integer_and_decimal(value: Scalar, expected: object) -> None:
    for family in (F.INTEGER, F.DECIMAL):
        bound = one(family, value)
        assert bound == expected
        assert type(bound) is type(expected)


def test_decimal_keeps_exact_digits() -> None:
    assert one(F.DECIMAL, "0.1000000000000000000001") == Decimal("0.1000000000000000000001")
    assert one(F.DECIMAL, 0.1) == Decimal("0.1")


@pytest.mark.parametrize(("value", "expected"), [(1, 1.0), ("2.5", 2.5), (0.1, 0.1), ("-3", -3.0)])
def test_float(value: Scalar, expected: float) -> None:
    bound = one(F.FLOAT, value)
    assert isinstance(bound, float)
    assert bound == expected


@pytest.mark.parametrize("family", [F.INTEGER, F.DECIMAL, F.FLOAT])
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (True, "expected a number, got true"),
        (False, "expected a number, got false"),
        ("abc", "'abc' is not a decimal number"),
        (" 1", "' 1' is not a decimal number"),
        ("NaN", "'NaN' is not a decimal number"),
        ("Infinity", "'Infinity' is not a decimal number"),
        ("0x10", "'0x10' is not a decimal number"),
        ("", "'' is not a decimal number"),
        (float("nan"), "expected a finite number"),
    ],
)
def test_number_failures(family: TypeFamily, value: Scalar, reason: str) -> None:
    assert bind_error(family, Operator.GT, value) == PREFIX + reason


def test_float_out_of_range() -> None:
    assert bind_error(F.FLOAT, Operator.GT, "1e400") == (
        PREFIX + "'1e400' is out of range for a float column"
    )


@pytest.mark.parametrize(
    ("value", "expected"), [(True, True), (False, False), ("true", True), ("false", False)]
)
def test_boolean(value: Scalar, expected: bool) -> None:
    assert one(F.BOOLEAN, value) is expected


@pytest.mark.parametrize(
    ("value", "shown"), [(1, "1"), (0, "0"), ("TRUE", "TRUE"), ("yes", "yes"), (1.5, "1.5")]
)
def test_boolean_failures(value: Scalar, shown: str) -> None:
    message = bind_error(F.BOOLEAN, Operator.EQ, value)
    assert message == PREFIX + f"expected true or false, got {shown}"


def test_date() -> None:
    assert one(F.DATE, "2026-02-28") == date(2026, 2, 28)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("2026-02-30", "'2026-02-30' is not a valid date"),
        ("2026-2-3", "'2026-2-3' is not a date (YYYY-MM-DD)"),
        ("2026-01-01T00:00:00", "'2026-01-01T00:00:00' is not a date (YYYY-MM-DD)"),
        (20260101, "expected a date (YYYY-MM-DD), got 20260101"),
    ],
)
def test_date_failures(value: Scalar, reason: str) -> None:
    assert bind_error(F.DATE, Operator.EQ, value) == PREFIX + reason


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-02", datetime(2026, 1, 2, tzinfo=UTC)),
        ("2026-01-02T03:04", datetime(2026, 1, 2, 3, 4, tzinfo=UTC)),
        ("2026-01-02T03:04:05", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02 03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05.5z", datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=UTC)),
        ("2026-01-02T03:04:05.1234567", datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)),
        ("2026-01-02T03:04:05+02:00", datetime(2026, 1, 2, 1, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05-0530", datetime(2026, 1, 2, 8, 34, 5, tzinfo=UTC)),
        ("2026-01-02T23:00:00-03", datetime(2026, 1, 3, 2, 0, tzinfo=UTC)),
        ("2026-01-01T00:30:00+01:00", datetime(2025, 12, 31, 23, 30, tzinfo=UTC)),
    ],
)
def test_timestamps(value: str, expected: datetime) -> None:
    assert one(F.TIMESTAMPTZ, value) == expected
    aware = one(F.TIMESTAMPTZ, value)
    assert isinstance(aware, datetime)
    assert aware.tzinfo is UTC
    naive = one(F.TIMESTAMP, value)
    assert isinstance(naive, datetime)
    assert naive.tzinfo is None
    assert naive == expected.replace(tzinfo=None)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("2026-01-02T25:00:00", "'2026-01-02T25:00:00' is not a valid date-time"),
        ("2026-01-32", "'2026-01-32' is not a valid date"),
        ("2026-01-02T03:04:05+25:00", "'+25:00' is not a valid UTC offset"),
        ("2026-01-02T03:04:05+01:60", "'+01:60' is not a valid UTC offset"),
        ("yesterday", "'yesterday' is not an ISO 8601 date or date-time"),
        ("2026-W01-1", "'2026-W01-1' is not an ISO 8601 date or date-time"),
        (1700000000, "expected an ISO 8601 date-time, got 1700000000"),
    ],
)
def test_timestamp_failures(value: Scalar, reason: str) -> None:
    for family in (F.TIMESTAMP, F.TIMESTAMPTZ):
        assert bind_error(family, Operator.GTE, value) == PREFIX + reason


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("03:04", time(3, 4)),
        ("03:04:05", time(3, 4, 5)),
        ("23:59:59.123", time(23, 59, 59, 123000)),
    ],
)
def test_time(value: str, expected: time) -> None:
    assert one(F.TIME, value) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("24:00", "'24:00' is not a valid time"),
        ("3:04", "expected a time (HH:MM[:SS[.ffffff]]), got 3:04"),
        ("03:04:05.1234567", "expected a time (HH:MM[:SS[.ffffff]]), got 03:04:05.1234567"),
        (300, "expected a time (HH:MM[:SS[.ffffff]]), got 300"),
    ],
)
def test_time_failures(value: Scalar, reason: str) -> None:
    assert bind_error(F.TIME, Operator.LT, value) == PREFIX + reason


def test_uuid_any_case_bound_lower_case() -> None:
    bound = one(F.UUID, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11")
    assert bound == uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    assert str(bound) == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("a0eebc999c0b4ef8bb6d6bb9bd380a11", "a0eebc999c0b4ef8bb6d6bb9bd380a11"),
        ("{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}"),
        ("x" * 100, "x" * 64),
        (42, "42"),
        (True, "true"),
    ],
)
def test_uuid_failures(value: Scalar, shown: str) -> None:
    message = bind_error(F.UUID, Operator.IN, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", value)
    assert message == f"field 'f' is a UUID column but received non-UUID value '{shown}'"


@pytest.mark.parametrize(
    ("value", "expected"),
    [("abc", "abc"), (5, "5"), (1.5, "1.5"), (1.0, "1.0"), (True, "true"), (False, "false")],
)
def test_text(value: Scalar, expected: str) -> None:
    assert one(F.TEXT, value) == expected


@pytest.mark.parametrize("family", [F.JSON, F.BYTES, F.ARRAY, F.OTHER])
def test_unsupported_families(family: TypeFamily) -> None:
    message = bind_error(family, Operator.EQ, "x")
    assert message == f"filters are not supported on field 'f' of type {family.value}"


@pytest.mark.parametrize("op", [Operator.EQ, Operator.NE, Operator.IN, Operator.NIN])
def test_nulls_stay_none(op: Operator) -> None:
    assert bind(F.INTEGER, op, None, "3").values == (None, 3)
    assert bind(F.UUID, op, None).values == (None,)


def test_like_only_on_text() -> None:
    assert bind(F.TEXT, Operator.LIKE, "a%").values == ("a%",)
    assert bind_error(F.INTEGER, Operator.LIKE, "1%") == (
        PREFIX + "like operator requires a text column, not integer"
    )
    assert bind_error(F.UUID, Operator.LIKE, "a%") == (
        PREFIX + "like operator requires a text column, not uuid"
    )


def test_like_on_any_family_when_allowed() -> None:
    assert bind(F.INTEGER, Operator.LIKE, "1%", like_any_family=True).values == ("1%",)
    assert bind(F.TIMESTAMPTZ, Operator.LIKE, "2026%", like_any_family=True).values == ("2026%",)


class TestEndOfDay:
    def test_date_only_upper_on_timestamp(self) -> None:
        bound = bind(F.TIMESTAMP, Operator.BETWEEN, "2026-01-01", "2026-01-31")
        assert bound.values == (datetime(2026, 1, 1), datetime(2026, 2, 1))
        assert bound.upper_exclusive

    def test_date_only_upper_on_timestamptz(self) -> None:
        bound = bind(F.TIMESTAMPTZ, Operator.BETWEEN, "2026-12-01T10:00:00+02:00", "2026-12-31")
        assert bound.values == (
            datetime(2026, 12, 1, 8, tzinfo=UTC),
            datetime(2027, 1, 1, tzinfo=UTC),
        )
        assert bound.upper_exclusive

    def test_datetime_upper_is_inclusive(self) -> None:
        bound = bind(F.TIMESTAMP, Operator.BETWEEN, "2026-01-01", "2026-01-31T00:00:00")
        assert bound.values == (datetime(2026, 1, 1), datetime(2026, 1, 31))
        assert not bound.upper_exclusive

    def test_date_column_gets_no_adjustment(self) -> None:
        bound = bind(F.DATE, Operator.BETWEEN, "2026-01-01", "2026-01-31")
        assert bound.values == (date(2026, 1, 1), date(2026, 1, 31))
        assert not bound.upper_exclusive

    def test_text_column_gets_no_adjustment(self) -> None:
        bound = bind(F.TEXT, Operator.BETWEEN, "2026-01-01", "2026-01-31")
        assert bound.values == ("2026-01-01", "2026-01-31")
        assert not bound.upper_exclusive

    def test_only_between(self) -> None:
        bound = bind(F.TIMESTAMP, Operator.LTE, "2026-01-31")
        assert bound.values == (datetime(2026, 1, 31),)
        assert not bound.upper_exclusive

    def test_last_representable_day(self) -> None:
        bound = bind(F.TIMESTAMP, Operator.BETWEEN, "9999-12-01", "9999-12-31")
        assert bound.values[1] == datetime(9999, 12, 31, 23, 59, 59, 999999)
        assert not bound.upper_exclusive


def test_first_failing_condition_is_reported() -> None:
    ff = FieldFilter(
        "f",
        (
            Condition(Operator.GT, (1,)),
            Condition(Operator.LT, ("x",)),
            Condition(Operator.EQ, (True,)),
        ),
    )
    with pytest.raises(EngineError) as info:
        bind_field_filter("ds", "t", Column("f", F.INTEGER), ff)
    assert info.value.message.endswith("'x' is not a decimal number")


def test_field_name_is_the_requested_one() -> None:
    ff = FieldFilter("ID", (Condition(Operator.EQ, ("x",)),))
    with pytest.raises(EngineError) as info:
        bind_field_filter("sqlite", "main.T", Column("id", F.INTEGER), ff)
    assert info.value.message == (
        "invalid filter value for field 'ID' of table 'main.T' in datasource 'sqlite': "
        "'x' is not a decimal number"
    )


def test_bind_keeps_condition_order_and_same_operator_twice() -> None:
    ff = FieldFilter("f", (Condition(Operator.GT, (1,)), Condition(Operator.GT, ("2",))))
    bound = bind_field_filter("ds", "t", Column("f", F.INTEGER), ff)
    assert bound == BoundFieldFilter(
        Column("f", F.INTEGER),
        (BoundCondition(Operator.GT, (1,)), BoundCondition(Operator.GT, (2,))),
    )


def test_merge_field_filters() -> None:
    a = (
        FieldFilter("x", (Condition(Operator.GT, (1,)),)),
        FieldFilter("y", (Condition(Operator.EQ, ("a",)),)),
    )
    b = (
        FieldFilter("z", (Condition(Operator.LT, (3,)),)),
        FieldFilter("x", (Condition(Operator.GT, (2,)),)),
    )
    assert merge_field_filters([a, b]) == (
        FieldFilter("x", (Condition(Operator.GT, (1,)), Condition(Operator.GT, (2,)))),
        FieldFilter("y", (Condition(Operator.EQ, ("a",)),)),
        FieldFilter("z", (Condition(Operator.LT, (3,)),)),
    )
    assert merge_field_filters([]) == ()
