"""§6.3 result objects, §6.4 credentials and §4.3.1 spool chunks (AES-256-GCM)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.crypto import (
    DecryptionError,
    KeySet,
    ObjectDecryptor,
    ObjectEncryptor,
    decrypt_credential,
    decrypt_object,
    encrypt_credential,
    encrypt_object,
    encrypt_object_stream,
    new_ephemeral_key,
    open_chunk,
    seal_chunk,
)
from tests.unit.crypto.vectors import (
    CREDENTIAL_CONNECTION_ID,
    MASTER_KEY_TEXT,
    STORED_CREDENTIAL,
    STORED_EMPTY_DOC,
)

KEY = KeySet.from_text(MASTER_KEY_TEXT).storage
ZERO_NONCE = bytes(12)


def _split(data: bytes, sizes: list[int]) -> list[bytes]:
    """Cut ``data`` into pieces of the given sizes (cycled); sizes of 0 give empty pieces."""
    pieces: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data) and sizes and i < 4 * len(sizes) + len(data):
        size = sizes[i % len(sizes)]
        pieces.append(data[pos : pos + size])
        pos += size
        i += 1
    if pos < len(data):
        pieces.append(data[pos:])
    return pieces


def _stream_encrypt(key: bytes, pieces: list[bytes], nonce: bytes) -> tuple[bytes, list[bytes]]:
    encryptor = ObjectEncryptor(key, nonce=nonce)
    outputs = [encryptor.update(piece) for piece in pieces]
    outputs.append(encryptor.finalize())
    return b"".join(outputs), outputs


def _stream_decrypt(key: bytes, pieces: list[bytes]) -> bytes:
    decryptor = ObjectDecryptor(key)
    out = [decryptor.update(piece) for piece in pieces]
    out.append(decryptor.finalize())
    return b"".join(out)


# --- §6.6 vectors ----------------------------------------------------------------------------


def test_storage_vector_decrypts() -> None:
    assert decrypt_object(KEY, STORED_EMPTY_DOC) == b"{}"
    assert decrypt_object(KEY, STORED_EMPTY_DOC.decode()) == b"{}"


def test_storage_vector_encrypts_with_zero_nonce() -> None:
    assert encrypt_object(KEY, b"{}", nonce=ZERO_NONCE) == STORED_EMPTY_DOC


def test_streaming_matches_storage_vector() -> None:
    assert _stream_encrypt(KEY, [b"{", b"}"], ZERO_NONCE)[0] == STORED_EMPTY_DOC
    assert b"".join(encrypt_object_stream(KEY, [b"{}"], nonce=ZERO_NONCE)) == STORED_EMPTY_DOC


def test_credential_vector(keys: KeySet) -> None:
    stored = encrypt_credential(
        keys.credentials, "secret", CREDENTIAL_CONNECTION_ID, nonce=ZERO_NONCE
    )
    assert stored == STORED_CREDENTIAL
    assert decrypt_credential(keys.credentials, stored, CREDENTIAL_CONNECTION_ID) == "secret"


# --- §6.3 one-shot ---------------------------------------------------------------------------


def test_random_nonce_per_object() -> None:
    first, second = encrypt_object(KEY, b"{}"), encrypt_object(KEY, b"{}")
    assert first != second
    assert decrypt_object(KEY, first) == decrypt_object(KEY, second) == b"{}"


def test_stored_bytes_are_ascii_base64() -> None:
    stored = encrypt_object(KEY, b"x" * 100)
    raw = base64.b64decode(stored, validate=True)
    assert len(raw) == 12 + 100 + 16
    stored.decode("ascii")


@pytest.mark.parametrize("position", [0, 11, 12, 13, -17, -1])
def test_tampered_object_fails(position: int) -> None:
    raw = bytearray(base64.b64decode(encrypt_object(KEY, b'{"a":1}')))
    raw[position] ^= 0x01
    with pytest.raises(DecryptionError, match=r"^decryption failed$"):
        decrypt_object(KEY, base64.b64encode(bytes(raw)))


@pytest.mark.parametrize("stored", [b"", b"AAAA", b"not base64!", STORED_EMPTY_DOC[:-4]])
def test_malformed_object_fails(stored: bytes) -> None:
    with pytest.raises(DecryptionError):
        decrypt_object(KEY, stored)


def test_wrong_key_fails(keys: KeySet) -> None:
    with pytest.raises(DecryptionError):
        decrypt_object(keys.credentials, STORED_EMPTY_DOC)


@pytest.mark.parametrize("key", [b"", bytes(16), bytes(33)])
def test_key_must_be_32_bytes(key: bytes) -> None:
    with pytest.raises(ValueError, match="32-byte key"):
        encrypt_object(key, b"{}")
    with pytest.raises(ValueError, match="32-byte key"):
        ObjectEncryptor(key)


def test_nonce_must_be_12_bytes() -> None:
    with pytest.raises(ValueError, match="nonce"):
        encrypt_object(KEY, b"{}", nonce=bytes(8))


# --- streaming -------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    plaintext=st.binary(max_size=600),
    sizes=st.lists(st.integers(min_value=0, max_value=64), max_size=12),
    nonce=st.binary(min_size=12, max_size=12),
)
def test_streaming_equals_one_shot(plaintext: bytes, sizes: list[int], nonce: bytes) -> None:
    expected = encrypt_object(KEY, plaintext, nonce=nonce)
    stored, outputs = _stream_encrypt(KEY, _split(plaintext, sizes), nonce)
    assert stored == expected
    # Every output chunk is complete base64 on its own (3-byte groups, padding only at the end).
    for chunk in outputs[:-1]:
        assert len(chunk) % 4 == 0
        assert b"=" not in chunk
    assert base64.b64decode(b"".join(outputs)) == base64.b64decode(expected)
    assert stored.startswith(base64.b64encode(nonce))


@settings(max_examples=200, deadline=None)
@given(
    plaintext=st.binary(max_size=600),
    sizes=st.lists(st.integers(min_value=0, max_value=50), max_size=12),
)
def test_streaming_decryptor_round_trips(plaintext: bytes, sizes: list[int]) -> None:
    stored = encrypt_object(KEY, plaintext)
    assert _stream_decrypt(KEY, _split(stored, sizes)) == plaintext


def test_streaming_output_is_bounded_by_chunk() -> None:
    encryptor = ObjectEncryptor(KEY, nonce=ZERO_NONCE)
    first = encryptor.update(b"a" * 3000)
    assert len(first) == 4 * (12 + 3000) // 3
    assert len(encryptor.update(b"b")) == 0  # carried until a whole 3-byte group exists
    assert len(encryptor.update(b"cd")) == 4


def test_streaming_decryptor_accepts_text_chunks() -> None:
    decryptor = ObjectDecryptor(KEY)
    out = decryptor.update(STORED_EMPTY_DOC.decode()) + decryptor.finalize()
    assert out == b"{}"


def test_streaming_decryptor_detects_tampering() -> None:
    raw = bytearray(base64.b64decode(encrypt_object(KEY, b"x" * 200)))
    raw[50] ^= 0x80
    with pytest.raises(DecryptionError):
        _stream_decrypt(KEY, _split(base64.b64encode(bytes(raw)), [7]))


def test_streaming_decryptor_detects_wrong_tag() -> None:
    raw = bytearray(base64.b64decode(STORED_EMPTY_DOC))
    raw[-1] ^= 0x01
    with pytest.raises(DecryptionError):
        _stream_decrypt(KEY, [base64.b64encode(bytes(raw))])


@pytest.mark.parametrize(
    "pieces",
    [
        [],
        [b"AAAA"],
        [STORED_EMPTY_DOC[:-4]],  # truncated: tag incomplete
        [STORED_EMPTY_DOC[:-1]],  # base64 group incomplete
        [STORED_EMPTY_DOC, b"AAAA"],  # trailing data
        [b"not base64!!"],
    ],
)
def test_streaming_decryptor_rejects_malformed(pieces: list[bytes]) -> None:
    with pytest.raises(DecryptionError):
        _stream_decrypt(KEY, pieces)


def test_streaming_decryptor_rejects_data_after_padding() -> None:
    stored = encrypt_object(KEY, b"{}!")  # 12 + 3 + 16 = 31 bytes → padded
    assert stored.endswith(b"=")
    decryptor = ObjectDecryptor(KEY)
    decryptor.update(stored)
    with pytest.raises(DecryptionError):
        decryptor.update(b"AAAA")


def test_finalize_twice_is_an_error() -> None:
    encryptor = ObjectEncryptor(KEY)
    encryptor.finalize()
    with pytest.raises(RuntimeError):
        encryptor.finalize()
    with pytest.raises(RuntimeError):
        encryptor.update(b"x")


# --- §6.4 credentials ------------------------------------------------------------------------


def test_credential_wrong_aad_fails(keys: KeySet) -> None:
    with pytest.raises(DecryptionError, match=r"^decryption failed$"):
        decrypt_credential(
            keys.credentials, STORED_CREDENTIAL, "0190a1b2-0000-7000-8000-000000000003"
        )


def test_credential_upper_case_id_is_a_different_aad(keys: KeySet) -> None:
    with pytest.raises(DecryptionError):
        decrypt_credential(keys.credentials, STORED_CREDENTIAL, CREDENTIAL_CONNECTION_ID.upper())


def test_credential_wrong_key_fails(keys: KeySet) -> None:
    with pytest.raises(DecryptionError):
        decrypt_credential(keys.storage, STORED_CREDENTIAL, CREDENTIAL_CONNECTION_ID)


@pytest.mark.parametrize("stored", ["", "!!!!", "AAAA", STORED_CREDENTIAL[:-4]])
def test_credential_malformed_fails(keys: KeySet, stored: str) -> None:
    with pytest.raises(DecryptionError, match=r"^decryption failed$"):
        decrypt_credential(keys.credentials, stored, CREDENTIAL_CONNECTION_ID)


def test_credential_round_trip_unicode(keys: KeySet) -> None:
    value = "pä$$wörd 🔑"
    stored = encrypt_credential(keys.credentials, value, CREDENTIAL_CONNECTION_ID)
    assert stored != encrypt_credential(keys.credentials, value, CREDENTIAL_CONNECTION_ID)
    assert decrypt_credential(keys.credentials, stored, CREDENTIAL_CONNECTION_ID) == value


def test_credential_non_utf8_plaintext_fails(keys: KeySet) -> None:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = bytes(12)
    blob = nonce + AESGCM(keys.credentials).encrypt(
        nonce, b"\xff", CREDENTIAL_CONNECTION_ID.encode()
    )
    with pytest.raises(DecryptionError):
        decrypt_credential(
            keys.credentials, base64.b64encode(blob).decode(), CREDENTIAL_CONNECTION_ID
        )


# --- §4.3.1 spool chunks ---------------------------------------------------------------------


def test_spool_chunk_round_trip() -> None:
    key = new_ephemeral_key()
    assert len(key) == 32
    assert new_ephemeral_key() != key
    blob = seal_chunk(key, b"row data", index=0, final=True)
    assert len(blob) == 12 + 8 + 16
    assert b"row data" not in blob
    assert open_chunk(key, blob, index=0, final=True) == b"row data"
    assert seal_chunk(key, b"row data", index=0, final=True)[:12] != blob[:12]  # fresh nonce


def test_spool_chunk_tamper_and_wrong_key() -> None:
    key = new_ephemeral_key()
    blob = bytearray(seal_chunk(key, b"row data", index=0, final=True))
    with pytest.raises(DecryptionError):
        open_chunk(new_ephemeral_key(), bytes(blob), index=0, final=True)
    blob[20] ^= 0x01
    with pytest.raises(DecryptionError):
        open_chunk(key, bytes(blob), index=0, final=True)
    with pytest.raises(DecryptionError):
        open_chunk(key, b"short", index=0, final=True)
