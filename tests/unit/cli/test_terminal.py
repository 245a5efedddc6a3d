"""Issue 24: the one escaping rule for what the CLI writes to a terminal from a server."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fetcher.cli.terminal import is_uuid, json_document_text, json_text, printable

#: Every character a terminal may act on or that reorders a line.
DANGEROUS = (
    [chr(c) for c in range(0x20)]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + ["\u061c", "\u200e", "\u200f", "\u2028", "\u2029"]
    + [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x2066, 0x206A)]
    + ["\ud800", "\udfff"]
)


@pytest.mark.parametrize("char", DANGEROUS)
def test_each_dangerous_character_is_shown_as_an_escape(char: str) -> None:
    shown = printable(f"a{char}b")
    code = ord(char)
    assert shown == (f"a\\x{code:02x}b" if code <= 0xFF else f"a\\u{code:04x}b")
    assert json.loads(json_text(f"a{char}b")) == f"a{char}b"
    assert char not in json_text(f"a{char}b")


def test_the_issue_payload_and_a_backslash() -> None:
    payload = "2026\x1b]0;PWNED\x07\x1b[2J\x1b[31mFAKE OK\x1b[0m"
    assert printable(payload) == "2026\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mFAKE OK\\x1b[0m"
    # a server cannot pass text for one of our escapes: its backslash is doubled
    assert printable("\\x1b") == "\\\\x1b"
    assert printable("ok é ü 日本 🙂") == "ok é ü 日本 🙂"
    assert printable(42) == "42"


@given(st.text())
def test_printable_and_json_text_leave_no_dangerous_character(text: str) -> None:
    for shown in (printable(text), json_text(text)):
        assert not any(char in shown for char in DANGEROUS)
    assert json.loads(json_text(text)) == text


def test_a_document_keeps_its_json_whitespace_and_meaning() -> None:
    document = json.dumps({"a": ["x\x9by\u202ez"]}, indent=2, ensure_ascii=False)
    shown = json_document_text(document)
    assert "\n" in shown
    assert "\x9b" not in shown
    assert "\u202e" not in shown
    assert json.loads(shown) == json.loads(document)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0190a1b2-0000-7000-8000-0000000000aa", True),
        ("0190A1B2-0000-7000-8000-0000000000AA", True),
        ("0190a1b200007000800000000000000aa", False),
        ("{0190a1b2-0000-7000-8000-0000000000aa}", False),
        ("0190a1b-20000-7000-8000-0000000000aa", False),
        ("job\x1b[2K", False),
        (None, False),
    ],
)
def test_is_uuid_accepts_only_the_canonical_form(value: object, expected: bool) -> None:
    assert is_uuid(value) is expected


def test_max_chars_cuts_the_escaped_text_and_says_how_much_is_left() -> None:
    assert printable("ab\x1bcd", max_chars=4) == "ab\\x… (4 more characters)"
    assert printable("abc", max_chars=3) == "abc"
