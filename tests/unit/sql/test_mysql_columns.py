"""The MySQL connector's whole-column DATETIME/TIMESTAMP path (speed, issue 12): every batch it
finishes equals :func:`datetime_text` value by value (§5.3 timestamp row), whatever the
precision, the fractions, the NULLs, and zero dates or odd shapes (which take the
value-by-value path)."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from fetcher.adapters.sql.mysql import datetime_column, datetime_text

_BASE = datetime(1, 1, 1)
_SPAN_SECONDS = int((datetime(9999, 12, 31, 23, 59, 59) - _BASE).total_seconds())


def _server_text(seconds: int, micros: int, precision: int) -> str:
    """A DATETIME(``precision``) value as the server prints it."""
    moment = _BASE + timedelta(seconds=seconds)
    text = f"{moment.year:04d}-" + moment.strftime("%m-%d %H:%M:%S")  # %Y drops zeros (glibc)
    if precision:
        text += "." + f"{micros:06d}"[:precision]
    return text


#: Fractions that end in zeros are the interesting ones: weight them.
_MICROS = st.one_of(
    st.integers(0, 999_999),
    st.integers(0, 999).map(lambda m: m * 1000),
    st.integers(0, 9).map(lambda m: m * 100_000),
    st.just(0),
)
_ZERO_DATES = st.sampled_from(
    ["0000-00-00 00:00:00", "2024-00-15 10:00:00", "2024-03-00 10:00:00", "0000-01-01 00:00:00"]
)


@st.composite
def _columns(draw: st.DrawFn) -> list[str | None]:
    precision = draw(st.integers(0, 6))
    value = st.builds(_server_text, st.integers(0, _SPAN_SECONDS), _MICROS, st.just(precision))
    zero = _ZERO_DATES.map(lambda text: text + ("." + "0" * precision if precision else ""))
    return draw(
        st.lists(
            st.one_of(value, st.none(), zero) if draw(st.booleans()) else st.one_of(value),
            max_size=40,
        )
    )


def _expected(values: list[str | None]) -> list[str | None]:
    return [None if value is None else datetime_text(value) for value in values]


@given(_columns())
def test_a_column_equals_datetime_text_value_by_value(values: list[str | None]) -> None:
    assert list(datetime_column(tuple(values))) == _expected(values)


def test_a_whole_column_of_zero_fractions_nulls_and_trailing_zeros() -> None:
    values = (
        "2026-01-01 00:00:37.000000",
        None,
        "2026-01-01 00:01:10.120000",
        "2026-01-01 00:01:10.000001",
        "2026-01-01 00:01:10.100000",
    )
    assert list(datetime_column(values)) == [
        "2026-01-01T00:00:37Z",
        None,
        "2026-01-01T00:01:10.12Z",
        "2026-01-01T00:01:10.000001Z",
        "2026-01-01T00:01:10.1Z",
    ]


def test_a_column_of_mixed_shapes_goes_value_by_value() -> None:
    """Mixed precisions, a zero date among plain values, no values at all."""
    mixed = ("2026-01-01 00:00:00", "2026-01-01 00:00:00.500000", "0000-00-00 00:00:00")
    assert list(datetime_column(mixed)) == _expected(list(mixed))
    assert list(datetime_column(())) == []
    assert list(datetime_column((None, None))) == [None, None]
