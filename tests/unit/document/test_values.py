"""The §5.3 value encoders of ``fetcher.engine.values``."""

from __future__ import annotations

import json
import math
import struct
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fetcher.engine.document import encode_row
from fetcher.engine.values import (
    ExactNumber,
    encode_bytes,
    encode_date,
    encode_datetime,
    encode_decimal,
    encode_float,
    encode_float32,
    encode_interval,
    encode_mysql_time,
    encode_text,
    encode_time,
    encode_timedelta,
    encode_uuid,
    encode_value,
    parse_json_exact,
)

_JSON_NUMBER = r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal("1.5E+3"), "1500"),
        (Decimal("1500.00"), "1500.00"),
        (Decimal("1E-7"), "0.0000001"),
        (Decimal("-12.340"), "-12.340"),
        (Decimal("0.00"), "0.00"),
        (
            Decimal("123456789012345678901234567890.123456789"),
            "123456789012345678901234567890.123456789",
        ),
        (Decimal("1E+30"), "1000000000000000000000000000000"),
        (Decimal("NaN"), "NaN"),
        (Decimal("sNaN"), "NaN"),
        (Decimal("Infinity"), "Infinity"),
        (Decimal("-Infinity"), "-Infinity"),
    ],
)
def test_encode_decimal(value: Decimal, expected: str) -> None:
    assert encode_decimal(value) == expected


@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_encode_decimal_is_exact_and_has_no_exponent(value: Decimal) -> None:
    text = encode_decimal(value)
    assert "E" not in text.upper()
    assert Decimal(text) == value
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    assert Decimal(text).as_tuple().exponent == min(exponent, 0)  # scale kept


@pytest.mark.parametrize(
    ("value", "expected"),
    [(math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity"), (1.5, 1.5), (-0.0, -0.0)],
)
def test_encode_float(value: float, expected: float | str) -> None:
    assert encode_float(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.10000000149011612, "0.1"),
        (3.4028234663852886e38, "3.4028235e+38"),
        (16777216.0, "16777216.0"),
        (1.0, "1.0"),
        (-0.0, "-0.0"),
        (1.401298464324817e-45, "1e-45"),
        (0.30000001192092896, "0.3"),
        (1.100000023841858, "1.1"),
    ],
)
def test_encode_float32_shortest(value: float, expected: str) -> None:
    result = encode_float32(value)
    assert isinstance(result, float)
    assert repr(result) == expected


def test_encode_float32_non_finite() -> None:
    assert encode_float32(math.nan) == "NaN"
    assert encode_float32(math.inf) == "Infinity"
    assert encode_float32(-math.inf) == "-Infinity"


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_encode_float32_round_trips_as_float32(value: float) -> None:
    result = encode_float32(value)
    assert isinstance(result, float)
    assert struct.pack("<f", float(repr(result))) == struct.pack("<f", value)
    assert len(repr(result)) <= len(repr(value))


def test_encode_date() -> None:
    assert encode_date(date(2026, 1, 2)) == "2026-01-02"
    assert encode_date(date(1, 1, 1)) == "0001-01-01"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05Z"),
        (datetime(2026, 1, 2, 3, 4, 5, 120000), "2026-01-02T03:04:05.12Z"),
        (datetime(2026, 1, 2, 3, 4, 5, 1), "2026-01-02T03:04:05.000001Z"),
        (datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), "2026-01-02T03:04:05.123456Z"),
        (
            datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=timezone(timedelta(hours=2))),
            "2026-01-02T01:04:05.5Z",
        ),
        (
            datetime(2025, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
            "2026-01-01T05:00:00Z",
        ),
        (datetime(1, 1, 1), "0001-01-01T00:00:00Z"),
    ],
)
def test_encode_datetime(value: datetime, expected: str) -> None:
    assert encode_datetime(value) == expected


def test_encode_datetime_outside_years_keeps_engine_text() -> None:
    value = datetime(1, 1, 1, 1, tzinfo=timezone(timedelta(hours=5)))
    assert encode_datetime(value) == value.isoformat()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (time(3, 4, 5), "03:04:05"),
        (time(3, 4, 5, 100), "03:04:05.0001"),
        (time(23, 59, 59, 999999), "23:59:59.999999"),
        (time(3, 4, 5, tzinfo=timezone(timedelta(hours=5, minutes=30))), "03:04:05+05:30"),
        (time(3, 4, 5, 250000, tzinfo=timezone(timedelta(hours=-8))), "03:04:05.25-08:00"),
        (time(3, 4, 5, tzinfo=UTC), "03:04:05+00:00"),
    ],
)
def test_encode_time(value: time, expected: str) -> None:
    assert encode_time(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (timedelta(0), "00:00:00"),
        (timedelta(hours=1, minutes=2, seconds=3), "01:02:03"),
        (timedelta(hours=-1, minutes=-2, seconds=-3), "-01:02:03"),
        (timedelta(hours=838, minutes=59, seconds=59), "838:59:59"),
        (-timedelta(hours=838, minutes=59, seconds=59), "-838:59:59"),
        (timedelta(days=2, microseconds=500000), "48:00:00.5"),
        (-timedelta(microseconds=1), "-00:00:00.000001"),
    ],
)
def test_encode_mysql_time(value: timedelta, expected: str) -> None:
    assert encode_mysql_time(value) == expected


@pytest.mark.parametrize(
    ("months", "days", "micros", "expected"),
    [
        (0, 0, 0, "PT0S"),
        (0, 1, 2 * 3_600_000_000, "P1DT2H"),
        (14, 0, 0, "P1Y2M"),
        (0, 0, 500_000, "PT0.5S"),
        (0, -1, 0, "-P1D"),
        (1, -1, 0, "P1M-1D"),
        (-14, -3, -3_723_000_000, "-P1Y2M3DT1H2M3S"),
        (12, 0, 0, "P1Y"),
        (-1, 0, 3_600_000_000, "P-1MT1H"),
        (0, 0, -1_500_000, "-PT1.5S"),
        (0, 2, -61_000_000, "P2DT-1M-1S"),
        (0, 0, 60_000_001, "PT1M0.000001S"),
    ],
)
def test_encode_interval(months: int, days: int, micros: int, expected: str) -> None:
    assert encode_interval(months, days, micros) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (timedelta(0), "PT0S"),
        (timedelta(days=1, hours=2), "P1DT2H"),
        (timedelta(hours=-1), "-PT1H"),
        (timedelta(days=-1, hours=-2), "-P1DT2H"),
        (timedelta(seconds=0.5), "PT0.5S"),
        (timedelta(days=400), "P400D"),
    ],
)
def test_encode_timedelta(value: timedelta, expected: str) -> None:
    assert encode_timedelta(value) == expected


def test_encode_bytes_uuid_text() -> None:
    assert encode_bytes(b"\x00\xff\x10") == "AP8Q"
    assert encode_bytes(b"ab") == "YWI="
    assert encode_bytes(bytearray(b"a")) == "YQ=="
    assert encode_bytes(memoryview(b"")) == ""
    uid = UUID("6A5B0F8C-2F1E-4A41-9F0E-3D2C1B0A9E88")
    assert encode_uuid(uid) == "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88"
    assert encode_text("a\ud800b") == "a\ufffdb"
    assert encode_text("\udfff") == "\ufffd"
    assert encode_text("\ud83d\ude00") == "\U0001f600"  # a pair held as two code points
    assert encode_text("héllo \U0001f600\x00") == "héllo \U0001f600\x00"


def test_exact_number_keeps_source_text() -> None:
    parsed = parse_json_exact('{"a": 1.10, "b": 1E5, "c": [1.0], "d": -0, "e": 7, "f": 0.5}')
    assert isinstance(parsed, dict)
    assert parsed["a"] == ExactNumber("1.10")
    assert parsed["b"] == ExactNumber("1E5")
    assert parsed["c"] == [1.0]
    assert parsed["d"] == ExactNumber("-0")
    assert type(parsed["e"]) is int
    assert type(parsed["f"]) is float
    text = encode_row({"j": parsed}, 0)
    for fragment in ('"a": 1.10,', '"b": 1E5,', "    1.0\n", '"d": -0,', '"e": 7,', '"f": 0.5\n'):
        assert fragment in text
    assert json.loads(text) == {"j": json.loads('{"a":1.1,"b":1E5,"c":[1.0],"d":0,"e":7,"f":0.5}')}


def test_exact_number_semantics() -> None:
    assert ExactNumber("1.10") == 1.1
    assert 1.1 == ExactNumber("1.10")
    assert ExactNumber("1E5") == ExactNumber("100000.0")
    assert hash(ExactNumber("1E5")) == hash(100000.0)
    assert ExactNumber("1") != "1"
    assert str(ExactNumber("2.50")) == "2.50"
    with pytest.raises(ValueError, match="not a JSON number"):
        ExactNumber("1,0]")
    with pytest.raises(ValueError, match="not a JSON number"):
        ExactNumber("NaN")


def test_parse_json_exact_huge_integer_and_constants() -> None:
    huge = "9" * 5000
    parsed = parse_json_exact(f"[{huge}, NaN, -Infinity]")
    assert isinstance(parsed, list)
    assert parsed[0].text == huge
    assert parsed[1:] == ["NaN", "-Infinity"]


@given(st.lists(st.from_regex(_JSON_NUMBER, fullmatch=True), min_size=1, max_size=8))
def test_parse_json_exact_numbers_written_back_verbatim(texts: list[str]) -> None:
    parsed = parse_json_exact("[" + ", ".join(texts) + "]")
    lines = encode_row({"v": parsed}, 0).splitlines()[2:-2]
    assert [line.strip().rstrip(",") for line in lines] == texts


def test_encode_value_dispatch() -> None:
    uid = UUID(int=1)
    value = {
        "n": None,
        "b": True,
        "i": 10**30,
        "f": math.inf,
        "d": Decimal("2.50"),
        "s": "x\ud800",
        "y": b"\x01",
        "dt": datetime(2026, 1, 2, 3, 4, 5, 120000),
        "da": date(2026, 1, 2),
        "t": time(1, 2),
        "td": timedelta(days=1),
        "u": uid,
        "l": (1, [Decimal("1.0")]),
        "m": {1: {"k": 2.5}},
        "e": ExactNumber("1.50"),
        "o": complex(1, 2),
    }
    assert encode_value(value) == {
        "n": None,
        "b": True,
        "i": 10**30,
        "f": "Infinity",
        "d": "2.50",
        "s": "x\ufffd",
        "y": "AQ==",
        "dt": "2026-01-02T03:04:05.12Z",
        "da": "2026-01-02",
        "t": "01:02:00",
        "td": "P1D",
        "u": str(uid),
        "l": [1, ["1.0"]],
        "m": {"1": {"k": 2.5}},
        "e": ExactNumber("1.50"),
        "o": "(1+2j)",
    }
    assert type(encode_value(True)) is bool
