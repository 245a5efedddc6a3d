"""The Worker writes the §6.3 base64 with SIMD ``pybase64`` (issue 12): it must write exactly
the standard library's bytes (standard alphabet, ``=`` padding, no line breaks) for any input,
and an ``ObjectEncryptor`` using it must store exactly what :func:`encrypt_object` stores."""

from __future__ import annotations

import base64
import os

import pybase64
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.crypto import ObjectEncryptor, decrypt_object, encrypt_object
from tests.unit.crypto.test_aead import KEY, ZERO_NONCE, _split


@settings(max_examples=500)
@given(st.binary(max_size=4096))
def test_pybase64_writes_the_standard_librarys_bytes(data: bytes) -> None:
    assert pybase64.b64encode(data) == base64.b64encode(data)


def test_pybase64_on_large_buffers_and_every_length_mod_3() -> None:
    for size in (0, 1, 2, 3, 63, 64, 65, 191, 192, 193, (5 << 20) + 1, 8 << 20):
        data = os.urandom(size)
        assert pybase64.b64encode(data) == base64.b64encode(data), size
        view = memoryview(data)[1:]
        assert pybase64.b64encode(view) == base64.b64encode(view), size


@settings(max_examples=200)
@given(st.binary(max_size=20_000), st.lists(st.integers(0, 5000), max_size=6))
def test_an_encryptor_with_pybase64_stores_the_same_object(data: bytes, sizes: list[int]) -> None:
    encryptor = ObjectEncryptor(KEY, nonce=ZERO_NONCE, b64encode=pybase64.b64encode)
    stored = b"".join([*(encryptor.update(p) for p in _split(data, sizes)), encryptor.finalize()])
    assert stored == encrypt_object(KEY, data, nonce=ZERO_NONCE)
    assert decrypt_object(KEY, stored) == data
