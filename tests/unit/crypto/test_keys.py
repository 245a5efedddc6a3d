"""§6.1 master-key parsing and §6.2 derivation, checked against the §6.6 vectors."""

from __future__ import annotations

import base64

import pytest

from fetcher.crypto import KeySet, MasterKeyError, derive_key, generate_master_key, parse_master_key
from fetcher.crypto.keys import STORAGE_LABEL
from tests.unit.crypto.vectors import MASTER_KEY_TEXT

VECTORS = {
    "credentials": "4580312d2cec32a18a6e3019ef77974f4355f123dd5c9ba63d45877875ee5d8f",
    "internal_hmac": "3815bac033f891b675602702e657d42abb7ab87d5d946d196cd949041fe01fa5",
    "external_hmac": "7fada934843cf2ac1b71dd13e1f06296c04bc538671c66c571ab606d2c28e8d7",
    "storage": "381c26d1db0224dbe2755393c835fcc5b968e050659cae102ebfcb0779a2d777",
}


@pytest.mark.parametrize(("name", "expected"), sorted(VECTORS.items()))
def test_derived_key_vectors(keys: KeySet, name: str, expected: str) -> None:
    assert getattr(keys, name).hex() == expected


def test_derive_key_output_lines(keys: KeySet) -> None:
    # §6.5 / §6.6 derive-key outputs are built from these hex values.
    assert f"External HMAC Key (hex): {keys.external_hmac.hex()}" == (
        "External HMAC Key (hex): 7fada934843cf2ac1b71dd13e1f06296c04bc538671c66c571ab606d2c28e8d7"
    )
    assert f"Storage Key (hex): {keys.storage.hex()}" == (
        "Storage Key (hex): 381c26d1db0224dbe2755393c835fcc5b968e050659cae102ebfcb0779a2d777"
    )


def test_derive_key_matches_keyset() -> None:
    master = parse_master_key(MASTER_KEY_TEXT)
    assert derive_key(master, STORAGE_LABEL) == KeySet.from_master(master).storage


def test_surrounding_whitespace_is_trimmed() -> None:
    assert parse_master_key(f" \t{MASTER_KEY_TEXT}\n") == base64.b64decode(MASTER_KEY_TEXT)


def test_longer_master_key_uses_all_bytes() -> None:
    short = bytes(range(32))
    longer = short + b"\x01"
    assert parse_master_key(base64.b64encode(longer).decode()) == longer
    assert KeySet.from_master(longer).storage != KeySet.from_master(short).storage


@pytest.mark.parametrize("text", [None, "", "   ", "\n\t"])
def test_missing_key_reason(text: str | None) -> None:
    with pytest.raises(MasterKeyError) as info:
        parse_master_key(text)
    assert info.value.reason == "APP_ENC_KEY is required"


@pytest.mark.parametrize(
    "text",
    [
        "not base64!",
        MASTER_KEY_TEXT.rstrip("="),  # padding is required
        MASTER_KEY_TEXT[:20] + " " + MASTER_KEY_TEXT[20:],  # inner whitespace
        MASTER_KEY_TEXT.replace("+", "-"),  # URL-safe alphabet is not standard base64
        "é" * 44,
        MASTER_KEY_TEXT + "AAAA",  # data after padding
    ],
)
def test_invalid_base64_reason(text: str) -> None:
    with pytest.raises(MasterKeyError) as info:
        parse_master_key(text)
    assert info.value.reason == "invalid master key (base64)"
    assert str(info.value) == "invalid master key (base64)"


@pytest.mark.parametrize("size", [1, 16, 31])
def test_too_short_reason(size: int) -> None:
    with pytest.raises(MasterKeyError) as info:
        parse_master_key(base64.b64encode(b"k" * size).decode())
    assert info.value.reason == f"master key too short: got {size} bytes, minimum 32 required"


def test_master_key_error_is_value_error() -> None:
    assert issubclass(MasterKeyError, ValueError)


def test_generate_master_key_round_trips() -> None:
    text = generate_master_key()
    assert text.endswith("=")
    assert len(parse_master_key(text)) == 32
    assert generate_master_key() != text


def test_keyset_repr_hides_key_bytes(keys: KeySet) -> None:
    shown = repr(keys) + str(keys)
    for value in (keys.credentials, keys.internal_hmac, keys.external_hmac, keys.storage):
        assert value.hex() not in shown
        assert repr(value) not in shown
        assert base64.b64encode(value).decode() not in shown


def test_keyset_is_frozen(keys: KeySet) -> None:
    with pytest.raises(AttributeError):
        keys.storage = b"x" * 32  # type: ignore[misc]
