"""§5.3 BSON encodings, on values built with ``bson`` (the nx-27017 test server cannot store
Decimal128, Timestamp or Regex, and returns UUID binaries as plain bytes)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import bson
import pytest
from bson.binary import Binary, UuidRepresentation
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.son import SON
from bson.timestamp import Timestamp

from fetcher.adapters.mongodb import encode_bson
from fetcher.engine.document import encode_row

U = uuid.UUID("0123abcd-4567-89ab-cdef-0123456789ab")


def _roundtrip(value: object) -> object:
    """The value as the driver hands it over (client codec options of the connector)."""
    options: CodecOptions[dict[str, object]] = CodecOptions(
        document_class=dict,
        tz_aware=False,
        datetime_conversion=DatetimeConversion.DATETIME_AUTO,
        unicode_decode_error_handler="replace",
        uuid_representation=UuidRepresentation.UNSPECIFIED,
    )
    return bson.decode(bson.encode({"v": value}), codec_options=options)["v"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, True),
        (Int64(9_007_199_254_740_993), 9_007_199_254_740_993),
        (-(2**31), -(2**31)),
        (1.5, 1.5),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
        ("ünï 😀", "ünï 😀"),
        (ObjectId("0123456789ABCDEF01234567"), "0123456789abcdef01234567"),
        (Decimal128("1500.00"), "1500.00"),
        (Decimal128("1.5E+3"), "1500"),
        (Decimal128("-0.000001"), "-0.000001"),
        (Decimal128("NaN"), "NaN"),
        (Decimal128("-Infinity"), "-Infinity"),
        (datetime(2026, 1, 2, 3, 4, 5, 120_000), "2026-01-02T03:04:05.12Z"),
        (datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "2026-01-02T03:04:05Z"),
        (Timestamp(1_767_323_045, 7), "2026-01-02T03:04:05Z"),
        (Regex("^a\\.b$", "is"), "/^a\\.b$/is"),
        (Regex("x", re.MULTILINE | re.IGNORECASE | re.VERBOSE), "/x/imx"),
        (Binary(U.bytes, 4), str(U)),
        (Binary(U.bytes, 3), str(U)),
        (Binary(b"\x00\x01\xff", 0), "AAH/"),
        (Binary(U.bytes, 5), "ASOrzUVniavN7wEjRWeJqw=="),
        (Binary(b"short", 4), "c2hvcnQ="),
        ({"b": {"c": [1, ObjectId("0" * 24)]}, "a": None}, {"b": {"c": [1, "0" * 24]}, "a": None}),
        (SON([("x", Decimal128("1.0"))]), {"x": "1.0"}),
        ([Int64(1), [2.5, "t"], {"k": True}], [1, [2.5, "t"], {"k": True}]),
        (MaxKey(), "MaxKey()"),
    ],
)
def test_bson_values_encode_per_5_3(value: object, expected: object) -> None:
    assert encode_bson(_roundtrip(value)) == expected


def test_extended_json_shaped_keys_stay_plain_data() -> None:
    """A stored document that looks like an Extended JSON marker is data, not a type."""
    value = {"$oid": "0123456789abcdef01234567", "$date": 5}
    assert encode_bson(_roundtrip(value)) == value


def test_uuid_object_and_decimal_values() -> None:
    assert encode_bson(U) == str(U)
    assert encode_bson(Decimal("1.50")) == "1.50"


def test_invalid_utf8_is_replaced() -> None:
    raw = bson.encode({"v": "x"}).replace(b"x\x00", b"\xff\x00")
    options: CodecOptions[dict[str, Any]] = CodecOptions(unicode_decode_error_handler="replace")
    decoded = bson.decode(raw, codec_options=options)
    assert encode_bson(decoded["v"]) == "\ufffd"


def test_lone_surrogate_text_is_replaced() -> None:
    assert encode_bson("a\ud800b") == "a\ufffdb"


def test_datetime_outside_years_1_to_9999_keeps_the_engine_text() -> None:
    value = _roundtrip(DatetimeMS(-62_135_596_800_001))  # one ms before 0001-01-01
    assert isinstance(value, DatetimeMS)
    assert encode_bson(value) == '{"$date": {"$numberLong": "-62135596800001"}}'


def test_encoded_rows_serialize_and_round_trip() -> None:
    doc = _roundtrip({"_id": ObjectId("0" * 24), "d": Decimal128("2.50"), "n": {"z": 1, "a": 2}})
    row = encode_bson(doc)
    assert isinstance(row, dict)
    assert json.loads(encode_row(row, 0)) == {"_id": "0" * 24, "d": "2.50", "n": {"a": 2, "z": 1}}
