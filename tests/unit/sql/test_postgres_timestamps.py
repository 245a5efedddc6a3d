"""The timestamp fast path of the PostgreSQL connector (§5.3) against its reference: psycopg's
stock loader and ``encode_datetime`` (``_DateTimeLoader``), on the text forms the engine prints
in the UTC, ISO-DateStyle session."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.adapters.sql.postgres import _DateTimeLoader, _DateTimeText
from fetcher.engine.values import encode_datetime

_TIMESTAMP = psycopg.postgres.types["timestamp"].oid
_TIMESTAMPTZ = psycopg.postgres.types["timestamptz"].oid

#: Text forms that are not ``YYYY-MM-DD HH:MM:SS[.f]``: kept as the engine's text (§5.3).
_SPECIAL = [
    "infinity",
    "-infinity",
    "0044-03-15 10:00:00 BC",
    "4713-01-01 00:00:00.5 BC",
    "10000-01-01 00:00:00",
    "294276-12-31 23:59:59.999999",
]


def _engine_text(value: datetime, zoned: bool) -> str:
    """What PostgreSQL prints: microseconds with trailing zeros dropped, ``+00`` in UTC."""
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text + ("+00" if zoned else "")


def _specials(zoned: bool) -> list[str]:
    if not zoned:
        return _SPECIAL
    return [
        text
        if "infinity" in text
        else text.replace(" BC", "+00 BC")
        if "BC" in text
        else text + "+00"
        for text in _SPECIAL
    ]


_datetimes = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59))


@settings(max_examples=300, deadline=None)
@given(
    st.booleans(),
    st.lists(
        st.none() | _datetimes | st.sampled_from(range(len(_SPECIAL))), min_size=1, max_size=8
    ),
)
def test_column_equals_reference_loader(zoned: bool, items: list[datetime | int | None]) -> None:
    oid = _TIMESTAMPTZ if zoned else _TIMESTAMP
    specials = _specials(zoned)
    values = [
        item
        if item is None
        else specials[item]
        if isinstance(item, int)
        else _engine_text(item, zoned)
        for item in items
    ]
    reference = _DateTimeLoader(oid)
    expected = [v if v is None else reference.load(v.encode()) for v in values]
    fast = _DateTimeText(oid, None, zoned=zoned)
    assert list(fast.column(tuple(values))) == expected
    assert [v if v is None else fast.text(v) for v in values] == expected
    assert fast.array_column([values, [values, None], None]) == [expected, [expected, None], None]


@settings(max_examples=200, deadline=None)
@given(st.booleans(), st.lists(_datetimes, min_size=1, max_size=8))
def test_common_shape_is_rfc3339_utc(zoned: bool, items: list[datetime]) -> None:
    oid = _TIMESTAMPTZ if zoned else _TIMESTAMP
    values = tuple(_engine_text(item, zoned) for item in items)
    converted = _DateTimeText(oid, None, zoned=zoned).column(values)
    assert converted == [encode_datetime(item.replace(tzinfo=UTC)) for item in items]


@pytest.mark.parametrize("zoned", [False, True])
def test_column_of_nulls_and_specials(zoned: bool) -> None:
    fast = _DateTimeText(_TIMESTAMPTZ if zoned else _TIMESTAMP, None, zoned=zoned)
    assert fast.column((None, None)) == (None, None)
    assert fast.column(tuple(_specials(zoned))) == _specials(zoned)
    odd = "2024-01-02 03:04:05+05:30" if zoned else "2024-01-02 03:04:05"
    expected = "2024-01-01T21:34:05Z" if zoned else "2024-01-02T03:04:05Z"
    assert fast.column((odd, None)) == [expected, None]
