"""§2.4 ``X-Product-Name``: normalization and the exact FET-0403 messages."""

from __future__ import annotations

import pytest

from fetcher.services.connections.validation import validate_product_header
from fetcher.services.errors import ApiError

REQUIRED = "X-Product-Name header is required and must not be empty"
BLANK = "X-Product-Name header must not be empty or whitespace-only"
TOO_LONG = "X-Product-Name must not exceed 100 characters"
CHARS = "X-Product-Name can only contain alphanumeric characters, underscores, and hyphens"


def _message(value: str | None, *, required: bool) -> str:
    with pytest.raises(ApiError) as caught:
        validate_product_header(value, required=required)
    assert caught.value.code == "FET-0403"
    assert caught.value.fields is None
    return caught.value.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [("payments", "payments"), ("  Pay_Ments-1 ", "pay_ments-1"), ("A" * 100, "a" * 100)],
)
@pytest.mark.parametrize("required", [True, False])
def test_valid_values_are_normalized(value: str, expected: str, required: bool) -> None:
    assert validate_product_header(value, required=required) == expected


@pytest.mark.parametrize("value", [None, "", "   ", "\t"])
def test_required_absent_or_blank(value: str | None) -> None:
    assert _message(value, required=True) == REQUIRED


def test_optional_absent_is_none() -> None:
    assert validate_product_header(None, required=False) is None


@pytest.mark.parametrize("value", ["", "   "])
def test_optional_blank(value: str) -> None:
    assert _message(value, required=False) == BLANK


@pytest.mark.parametrize("required", [True, False])
def test_too_long(required: bool) -> None:
    assert _message("a" * 101, required=required) == TOO_LONG
    assert _message(" " + "a" * 101 + " ", required=required) == TOO_LONG


@pytest.mark.parametrize("value", ["pay ments", "pay.ments", "payé", "a/b", "a\nb", "x*"])
@pytest.mark.parametrize("required", [True, False])
def test_bad_characters(value: str, required: bool) -> None:
    assert _message(value, required=required) == CHARS


def test_length_is_checked_before_characters() -> None:
    assert _message("!" * 101, required=True) == TOO_LONG
