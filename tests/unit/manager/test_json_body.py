"""Strict body decoding, media types and request IDs (contract §2.1)."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fetcher.manager.json_body import check_media_type, parse_json_object, request_id_from
from fetcher.services.errors import ApiError


def _parse_error(body: bytes) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_json_object(body)
    return caught.value


def test_object_is_returned() -> None:
    assert parse_json_object(b'{"a": [1, 2.5, "x", null, true]}') == {
        "a": [1, 2.5, "x", None, True]
    }


@pytest.mark.parametrize("body", [b"", b"   ", b"\n\t"])
def test_empty_body(body: bytes) -> None:
    err = _parse_error(body)
    assert (err.code, err.title, err.message) == (
        "FET-0001",
        "Invalid payload",
        "empty request body",
    )


@pytest.mark.parametrize("body", [b"[]", b"1", b'"x"', b"null", b"true"])
def test_non_object(body: bytes) -> None:
    err = _parse_error(body)
    assert (err.code, err.title, err.message) == (
        "FET-0001",
        "Invalid payload",
        "request body must be a JSON object",
    )


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b'{"a":1,}',
        b"{'a':1}",
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b'{"a": -Infinity}',
        b'{"a": [NaN]}',
        b'{"a": "x\\u0000y"}',
        b'{"a\\u0000": 1}',
        b'{"a": "\\ud800"}',
        b'{"a": "\\udc00"}',
        b'{"\\ud800": 1}',
        b'{"a": ["ok", {"b": "\\ud83d"}]}',
        b'{"a": 1e400}',
        b'{"a": -1e400}',
        b'{"a": 1E400}',
        b'{"a": 12345678901234567890}',
        b'{"a": -12345678901234567890}',
        b'{"a": [1' + b"0" * 5000 + b"]}",
        b'{"a": "\xff"}',
        b'{"a": "\xed\xa0\x80"}',
        b'\xef\xbb\xbf{"a": 1}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a": 1} {"b": 2}',
    ],
)
def test_unparsable_and_hostile_values(body: bytes) -> None:
    err = _parse_error(body)
    assert (err.code, err.title, err.message) == (
        "FET-0001",
        "Invalid payload",
        "unable to parse request body",
    )


def test_nineteen_digit_integers_are_accepted() -> None:
    assert parse_json_object(b'{"a": 1234567890123456789, "b": -1234567890123456789}') == {
        "a": 1234567890123456789,
        "b": -1234567890123456789,
    }


def test_paired_surrogates_and_other_text_are_accepted() -> None:
    assert parse_json_object(b'{"e": "\\ud83d\\ude00", "t": "caf\xc3\xa9"}') == {
        "e": "\U0001f600",
        "t": "café",
    }


def test_large_finite_floats_and_underflow_are_accepted() -> None:
    assert parse_json_object(b'{"a": 1.7e308, "b": 1e-400}') == {"a": 1.7e308, "b": 0.0}


def test_duplicate_keys_last_wins() -> None:
    assert parse_json_object(b'{"a": 1, "a": 2, "b": {"c": 1, "c": 3}}') == {"a": 2, "b": {"c": 3}}


def test_numbers_keep_their_json_kind() -> None:
    parsed = parse_json_object(b'{"i": 5432, "f": 5432.0, "e": 1e2}')
    assert type(parsed["i"]) is int
    assert type(parsed["f"]) is float
    assert type(parsed["e"]) is float
    assert json.dumps(parsed) == '{"i": 5432, "f": 5432.0, "e": 100.0}'


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "APPLICATION/JSON",
        "Application/Json; charset=utf-8",
        "application/json;charset=UTF-8",
        "application/merge-patch+json",
        "application/vnd.api+json; charset=utf-8",
        "application/problem+JSON",
    ],
)
def test_accepted_media_types(content_type: str | None) -> None:
    check_media_type(content_type)


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "",
        "  ",
        "; charset=utf-8",
        "text/plain",
        "application/xml",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/json",
        "application/+json",
        "application/jsonx",
        "application/json-seq",
        "application/*",
        "*/*",
        "json",
    ],
)
def test_rejected_media_types(content_type: str | None) -> None:
    with pytest.raises(ApiError) as caught:
        check_media_type(content_type)
    assert caught.value.code == "FET-0009"


@pytest.mark.parametrize("value", ["a", "req-123", "x" * 128, "!~", "A.b_c:d/e"])
def test_request_id_is_reused(value: str) -> None:
    assert request_id_from(value) == value


@pytest.mark.parametrize("value", [None, "", "x" * 129, "has space", "tab\t", "é", "a\x7f"])
def test_request_id_is_generated(value: str | None) -> None:
    generated = request_id_from(value)
    assert uuid.UUID(generated).version == 4
    assert generated == str(uuid.UUID(generated))


_SAFE_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**18), max_value=10**18)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _SAFE_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_SAFE_TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_give_an_object_or_fet_0001(body: bytes) -> None:
    try:
        parsed: object = parse_json_object(body)
    except ApiError as err:
        parsed = (err.code, err.title)
    assert isinstance(parsed, dict) or parsed == ("FET-0001", "Invalid payload")


@given(st.dictionaries(_SAFE_TEXT, _JSON_VALUES, max_size=5))
def test_safe_objects_round_trip(value: dict[str, object]) -> None:
    assert parse_json_object(json.dumps(value).encode()) == value
    assert parse_json_object(json.dumps(value, ensure_ascii=False).encode()) == value
