"""Worker-side binding of filter values to discovered columns (contract §3.4, §11.4).

After discovery the Worker knows each filtered column's :class:`TypeFamily`; this module turns
the JSON scalars of a :class:`FieldFilter` into typed Python values per the §3.4 table "Values
bound per column type family", and applies the between end-of-day rule.

**Order of checks** for one field: the family must support filters (json, bytes, array and
other do not); then each condition in request order: ``like`` needs a text-family column
(except on MongoDB, where any field may be matched); then each value in order.

Failure texts (§4.5, category validation):

* ``invalid filter value for field '<f>' of table '<t>' in datasource '<ds>': <reason>``
  (``like`` on a non-text column uses the reason ``like operator requires a text column,
  not <family>``);
* ``field '<f>' is a UUID column but received non-UUID value '<v>'`` (``<v>`` is the string as
  given, or the JSON text of a non-string, cut to 64 characters);
* ``filters are not supported on field '<f>' of type <family>``.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal, InvalidOperation

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import (
    BoundCondition,
    BoundFieldFilter,
    Condition,
    FieldFilter,
    Operator,
    Scalar,
)
from fetcher.engine.types import Column, TypeFamily

__all__ = ["UNSUPPORTED_FAMILIES", "bind_field_filter", "merge_field_filters"]

#: §3.4: families on which no filter is accepted.
UNSUPPORTED_FAMILIES = frozenset(
    {TypeFamily.JSON, TypeFamily.BYTES, TypeFamily.ARRAY, TypeFamily.OTHER}
)
_TIMESTAMPS = frozenset({TypeFamily.TIMESTAMP, TypeFamily.TIMESTAMPTZ})
_MAX_UUID_ECHO = 64
_MAX_INT_DIGITS = 1000

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<h>\d{2}):(?P<m>\d{2})"
    r"(?::(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?"
    r"(?P<tz>[Zz]|[+-]\d{2}(?::?\d{2})?)?"
)
_TIME = re.compile(r"(?P<h>\d{2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,6}))?)?")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


class _Reject(ValueError):
    """A value does not fit the column family; the message is the §4.5 ``<reason>``."""


def _json_text(value: Scalar) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _bind_number(value: Scalar, family: TypeFamily) -> object:
    """integer/decimal → ``int`` when integral, else ``Decimal``; float → ``float``."""
    if isinstance(value, bool) or value is None:
        raise _Reject(f"expected a number, got {_json_text(value)}")
    if isinstance(value, str):
        if not _NUMBER.fullmatch(value):
            raise _Reject(f"'{value}' is not a decimal number")
        text = value
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _Reject("expected a finite number")
        text = repr(value)
    else:
        text = str(value)
    if family is TypeFamily.FLOAT:
        number = float(text)
        if not math.isfinite(number):
            raise _Reject(f"'{text}' is out of range for a float column")
        return number
    try:
        exact = Decimal(text)
        integral = exact == exact.to_integral_value()
    except InvalidOperation:
        raise _Reject(f"'{text}' is out of range") from None
    # A huge exponent stays a Decimal: int("1e999999999") would build a billion digits.
    return int(exact) if integral and exact.adjusted() <= _MAX_INT_DIGITS else exact


def _bind_boolean(value: Scalar, _family: TypeFamily) -> object:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise _Reject(f"expected true or false, got {_json_text(value)}")


def _parse_date(value: str) -> date:
    if not _DATE.fullmatch(value):
        raise _Reject(f"'{value}' is not a date (YYYY-MM-DD)")
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise _Reject(f"'{value}' is not a valid date") from None


def _bind_date(value: Scalar, _family: TypeFamily) -> object:
    if not isinstance(value, str):
        raise _Reject(f"expected a date (YYYY-MM-DD), got {_json_text(value)}")
    return _parse_date(value)


def _offset(text: str | None) -> timezone:
    if text is None or text in ("Z", "z"):
        return UTC
    digits = text[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + int(digits[2:] or 0)
    if int(digits[2:] or 0) > 59 or minutes >= 24 * 60:
        raise _Reject(f"'{text}' is not a valid UTC offset")
    return timezone((-1 if text[0] == "-" else 1) * timedelta(minutes=minutes))


def _parse_timestamp(value: str, family: TypeFamily) -> datetime:
    """§3.4: date or ISO 8601 date-time, no offset = UTC; offsets converted to UTC."""
    if _DATE.fullmatch(value):
        moment = datetime.combine(_parse_date(value), time(), UTC)
    else:
        match = _DATETIME.fullmatch(value)
        if match is None:
            raise _Reject(f"'{value}' is not an ISO 8601 date or date-time")
        day = _parse_date(match["date"])
        fraction = (match["f"] or "")[:6].ljust(6, "0")
        zone = _offset(match["tz"])
        try:
            clock = time(int(match["h"]), int(match["m"]), int(match["s"] or 0), int(fraction))
            moment = datetime.combine(day, clock, zone).astimezone(UTC)
        except (ValueError, OverflowError):
            raise _Reject(f"'{value}' is not a valid date-time") from None
    return moment if family is TypeFamily.TIMESTAMPTZ else moment.replace(tzinfo=None)


def _bind_timestamp(value: Scalar, family: TypeFamily) -> object:
    if not isinstance(value, str):
        raise _Reject(f"expected an ISO 8601 date-time, got {_json_text(value)}")
    return _parse_timestamp(value, family)


def _bind_time(value: Scalar, _family: TypeFamily) -> object:
    match = _TIME.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise _Reject(f"expected a time (HH:MM[:SS[.ffffff]]), got {_json_text(value)}")
    fraction = (match["f"] or "").ljust(6, "0")
    try:
        return time(int(match["h"]), int(match["m"]), int(match["s"] or 0), int(fraction))
    except ValueError:
        raise _Reject(f"'{value}' is not a valid time") from None


def _bind_uuid(value: Scalar, _family: TypeFamily) -> object:
    if isinstance(value, str) and _UUID.fullmatch(value):
        return uuid.UUID(value.lower())
    raise _Reject(f"'{_json_text(value)}' is not a UUID")  # replaced by the UUID text


def _bind_text(value: Scalar, _family: TypeFamily) -> object:
    return _json_text(value)


_BINDERS: Mapping[TypeFamily, Callable[[Scalar, TypeFamily], object]] = {
    TypeFamily.INTEGER: _bind_number,
    TypeFamily.DECIMAL: _bind_number,
    TypeFamily.FLOAT: _bind_number,
    TypeFamily.BOOLEAN: _bind_boolean,
    TypeFamily.DATE: _bind_date,
    TypeFamily.TIMESTAMP: _bind_timestamp,
    TypeFamily.TIMESTAMPTZ: _bind_timestamp,
    TypeFamily.TIME: _bind_time,
    TypeFamily.UUID: _bind_uuid,
    TypeFamily.TEXT: _bind_text,
}


def _end_of_day(condition: Condition, family: TypeFamily) -> bool:
    """§3.4 end-of-day rule: a date-only second ``between`` value on a timestamp column."""
    upper = condition.values[1]
    return family in _TIMESTAMPS and isinstance(upper, str) and bool(_DATE.fullmatch(upper))


def _bind_condition(
    condition: Condition, family: TypeFamily, bind: Callable[[Scalar, TypeFamily], object]
) -> BoundCondition:
    if condition.op is Operator.LIKE:
        return BoundCondition(condition.op, (str(condition.values[0]),))
    bound = tuple(None if v is None else bind(v, family) for v in condition.values)
    if condition.op is Operator.BETWEEN and _end_of_day(condition, family):
        lower, upper = bound
        if not isinstance(upper, datetime):  # pragma: no cover - _parse_timestamp's result
            raise TypeError("a timestamp bound must be a datetime")
        try:
            return BoundCondition(condition.op, (lower, upper + timedelta(days=1)), True)
        except OverflowError:  # 9999-12-31: the day ends with the last representable instant
            return BoundCondition(
                condition.op,
                (lower, upper.replace(hour=23, minute=59, second=59, microsecond=999999)),
            )
    return BoundCondition(condition.op, bound)


def bind_field_filter(
    ds: str,
    table_key: str,
    column: Column,
    field_filter: FieldFilter,
    *,
    like_any_family: bool = False,
) -> BoundFieldFilter:
    """Bind ``field_filter`` to ``column`` (§3.4 "Values bound per column type family").

    ``like_any_family`` lifts the text-only rule for ``like`` (MongoDB, §3.4 "LIKE"). The
    pattern of ``like`` is always bound as the string given. Raises ``EngineError(VALIDATION)``
    with a §4.5 issue text.
    """
    field, family = field_filter.field, column.family
    if family in UNSUPPORTED_FAMILIES:
        raise EngineError(
            ErrorCategory.VALIDATION,
            f"filters are not supported on field '{field}' of type {family.value}",
        )
    bind = _BINDERS[family]
    conditions: list[BoundCondition] = []
    for condition in field_filter.conditions:
        try:
            if (
                condition.op is Operator.LIKE
                and family is not TypeFamily.TEXT
                and not like_any_family
            ):
                raise _Reject(f"like operator requires a text column, not {family.value}")
            conditions.append(_bind_condition(condition, family, bind))
        except _Reject as exc:
            raise _value_error((ds, table_key, field), family, condition, exc) from None
    return BoundFieldFilter(column=column, conditions=tuple(conditions))


def _value_error(
    where: tuple[str, str, str], family: TypeFamily, condition: Condition, exc: _Reject
) -> EngineError:
    ds, table, field = where
    if family is TypeFamily.UUID and condition.op is not Operator.LIKE:
        bad = next(v for v in condition.values if v is not None and not _is_uuid(v))
        echo = _json_text(bad)[:_MAX_UUID_ECHO]
        return EngineError(
            ErrorCategory.VALIDATION,
            f"field '{field}' is a UUID column but received non-UUID value '{echo}'",
        )
    return EngineError(
        ErrorCategory.VALIDATION,
        f"invalid filter value for field '{field}' of table '{table}' in datasource '{ds}': {exc}",
    )


def _is_uuid(value: Scalar) -> bool:
    return isinstance(value, str) and _UUID.fullmatch(value) is not None


def merge_field_filters(groups: Iterable[Sequence[FieldFilter]]) -> tuple[FieldFilter, ...]:
    """§3.4: merge the filters of table keys that normalize to the same table (§3.3).

    Conditions on the same field name are concatenated (ANDed), so an operator given twice is
    applied twice. Fields keep the order of their first appearance. The caller re-checks the
    2,000-value cap with ``parse.check_table_value_count`` on the result.
    """
    merged: dict[str, list[Condition]] = {}
    for group in groups:
        for field_filter in group:
            merged.setdefault(field_filter.field, []).extend(field_filter.conditions)
    return tuple(FieldFilter(field, tuple(conds)) for field, conds in merged.items())
