"""AES-256-GCM for result objects, credentials and spool chunks (CONTRACT §6.3, §6.4, §4.3.1).

Stored formats:

* Result object (§6.3): ASCII ``base64std(nonce(12) ‖ ciphertext ‖ tag(16))`` under the storage
  key, no AAD. :func:`encrypt_object` builds it in one shot; :class:`ObjectEncryptor` builds the
  identical bytes incrementally with memory bounded by the chunk size.
* Credential (§6.4): the same layout under the credentials key, AAD = the connection ID (UTF-8).
* Spool chunk (§4.3.1, §13 "Spool integrity"): raw ``nonce(12) ‖ ciphertext ‖ tag(16)`` under an
  ephemeral key, with a fresh random nonce per chunk and AAD = :func:`spool_chunk_aad` (the
  chunk's index and a final-chunk flag), so chunks cannot be reordered, dropped or truncated
  undetected.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Callable, Iterable, Iterator

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import (
    AEADDecryptionContext,
    AEADEncryptionContext,
    Cipher,
    algorithms,
    modes,
)
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "KEY_SIZE",
    "NONCE_SIZE",
    "TAG_SIZE",
    "DecryptionError",
    "ObjectDecryptor",
    "ObjectEncryptor",
    "decrypt_credential",
    "decrypt_object",
    "encrypt_credential",
    "encrypt_object",
    "encrypt_object_stream",
    "new_ephemeral_key",
    "open_chunk",
    "seal_chunk",
    "spool_chunk_aad",
]

KEY_SIZE = 32
NONCE_SIZE = 12
TAG_SIZE = 16
_DECRYPTION_FAILED = "decryption failed"


class DecryptionError(Exception):
    """Authentication or format failure; the message is always ``decryption failed``."""

    def __init__(self, message: str = _DECRYPTION_FAILED) -> None:
        super().__init__(message)


def _check_key(key: bytes) -> None:
    if len(key) != KEY_SIZE:
        raise ValueError(f"AES-256-GCM needs a {KEY_SIZE}-byte key, got {len(key)} bytes")


def _nonce(nonce: bytes | None) -> bytes:
    if nonce is None:
        return secrets.token_bytes(NONCE_SIZE)
    if len(nonce) != NONCE_SIZE:
        raise ValueError(f"nonce must be {NONCE_SIZE} bytes, got {len(nonce)}")
    return bytes(nonce)


def _seal(key: bytes, plaintext: bytes, aad: bytes | None, nonce: bytes | None) -> bytes:
    _check_key(key)
    iv = _nonce(nonce)
    return iv + AESGCM(key).encrypt(iv, plaintext, aad)


def _open(key: bytes, blob: bytes, aad: bytes | None) -> bytes:
    _check_key(key)
    if len(blob) < NONCE_SIZE + TAG_SIZE:
        raise DecryptionError
    try:
        return AESGCM(key).decrypt(blob[:NONCE_SIZE], blob[NONCE_SIZE:], aad)
    except InvalidTag:
        raise DecryptionError from None


def _b64decode(data: bytes | str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise DecryptionError from None


# --- §6.3 result objects ---------------------------------------------------------------------


def encrypt_object(storage_key: bytes, plaintext: bytes, *, nonce: bytes | None = None) -> bytes:
    """Return the §6.3 stored bytes: ASCII base64std(nonce ‖ ct ‖ tag), no AAD.

    ``nonce`` is for test vectors only; production callers leave it ``None`` (random).
    """
    return base64.b64encode(_seal(storage_key, plaintext, None, nonce))


def decrypt_object(storage_key: bytes, stored: bytes | str) -> bytes:
    """Inverse of :func:`encrypt_object`; raises :class:`DecryptionError` on any failure."""
    return _open(storage_key, _b64decode(stored), None)


#: ``update_into`` needs room for ``len(data) + block size - 1`` bytes (the ``cryptography`` API).
_GCM_UPDATE_SLACK = 15


class ObjectEncryptor:
    """Streaming §6.3 encryptor producing exactly the bytes :func:`encrypt_object` would.

    Feed plaintext with :meth:`update` and write each returned chunk in order, then write the
    result of :meth:`finalize`. Base64 is emitted in whole 3-byte groups (the remainder, at most
    2 bytes, is carried), the nonce leads the output and the tag ends it. Memory is bounded by
    the size of the chunk passed in.
    """

    def __init__(
        self,
        storage_key: bytes,
        *,
        nonce: bytes | None = None,
        b64encode: Callable[[bytes | memoryview], bytes] = base64.b64encode,
    ) -> None:
        """``b64encode`` writes the base64 text: the standard library's unless the host hands
        a faster one that writes exactly the same bytes (the Worker: SIMD ``pybase64``)."""
        _check_key(storage_key)
        self._b64encode = b64encode
        iv = _nonce(nonce)
        self._encryptor: AEADEncryptionContext = Cipher(
            algorithms.AES(storage_key), modes.GCM(iv)
        ).encryptor()
        self._carry = iv  # 12 bytes: a multiple of 3, emitted with the first output
        #: The carry and the next ciphertext, reused from chunk to chunk: the ciphertext is
        #: written into it and base64 reads it in place, with no copy of either.
        self._buffer = bytearray()
        self._finalized = False

    def update(self, chunk: bytes | memoryview) -> bytes:
        """Encrypt ``chunk``; return the next base64 output (possibly empty)."""
        if self._finalized:
            raise RuntimeError("ObjectEncryptor already finalized")
        carried = len(self._carry)
        needed = carried + len(chunk) + _GCM_UPDATE_SLACK
        if len(self._buffer) < needed:
            self._buffer = bytearray(needed)
        with memoryview(self._buffer) as buffer:
            buffer[:carried] = self._carry
            end = carried + self._encryptor.update_into(chunk, buffer[carried:])
            cut = end - end % 3
            self._carry = bytes(buffer[cut:end])
            return self._b64encode(buffer[:cut])

    def finalize(self) -> bytes:
        """Finish encryption; return the last base64 output, ending with the tag and padding."""
        if self._finalized:
            raise RuntimeError("ObjectEncryptor already finalized")
        self._finalized = True
        tail = self._carry + self._encryptor.finalize() + self._encryptor.tag
        self._carry = b""
        return self._b64encode(tail)


def encrypt_object_stream(
    storage_key: bytes, chunks: Iterable[bytes], *, nonce: bytes | None = None
) -> Iterator[bytes]:
    """Generator form of :class:`ObjectEncryptor`; skips empty output chunks."""
    encryptor = ObjectEncryptor(storage_key, nonce=nonce)
    for chunk in chunks:
        out = encryptor.update(chunk)
        if out:
            yield out
    yield encryptor.finalize()


class ObjectDecryptor:
    """Streaming inverse of :class:`ObjectEncryptor`: base64 chunks in, plaintext chunks out.

    The tag is verified only by :meth:`finalize`, which raises :class:`DecryptionError` on a
    mismatch or malformed input. Plaintext returned by :meth:`update` is unauthenticated until
    then: a consumer MUST discard everything it received when :meth:`finalize` raises.
    """

    def __init__(self, storage_key: bytes) -> None:
        _check_key(storage_key)
        self._key = storage_key
        self._text = b""  # base64 characters not yet forming a whole 4-char group
        self._raw = b""  # decoded bytes held back: the nonce before it is complete, the last 16
        self._padded = False
        self._cipher_ctx: AEADDecryptionContext | None = None  # set once the nonce is known
        self._finalized = False

    def update(self, chunk: bytes | str) -> bytes:
        """Feed base64 text; return any plaintext that can already be released."""
        if self._finalized:
            raise RuntimeError("ObjectDecryptor already finalized")
        data = chunk.encode("ascii", "replace") if isinstance(chunk, str) else bytes(chunk)
        if not data:
            return b""
        if self._padded:
            raise DecryptionError  # data after the final padded group
        text = self._text + data
        cut = len(text) - len(text) % 4
        self._text = text[cut:]
        group = text[:cut]
        if group.endswith(b"="):
            self._padded = True
        return self._feed(_b64decode(group))

    def _feed(self, raw: bytes) -> bytes:
        buf = self._raw + raw
        if self._cipher_ctx is None:
            if len(buf) < NONCE_SIZE:
                self._raw = buf
                return b""
            nonce, buf = buf[:NONCE_SIZE], buf[NONCE_SIZE:]
            self._cipher_ctx = Cipher(algorithms.AES(self._key), modes.GCM(nonce)).decryptor()
        if len(buf) <= TAG_SIZE:
            self._raw = buf
            return b""
        body, self._raw = buf[:-TAG_SIZE], buf[-TAG_SIZE:]
        return self._cipher_ctx.update(body)

    def finalize(self) -> bytes:
        """Verify the tag; return the last plaintext bytes or raise :class:`DecryptionError`."""
        if self._finalized:
            raise RuntimeError("ObjectDecryptor already finalized")
        self._finalized = True
        if self._text or self._cipher_ctx is None or len(self._raw) != TAG_SIZE:
            raise DecryptionError
        try:
            return self._cipher_ctx.finalize_with_tag(self._raw)
        except InvalidTag:
            raise DecryptionError from None


# --- §6.4 credentials ------------------------------------------------------------------------


def encrypt_credential(
    credentials_key: bytes, plaintext: str, connection_id: str, *, nonce: bytes | None = None
) -> str:
    """Return ``base64std(nonce ‖ ct ‖ tag)`` with AAD = ``connection_id`` UTF-8 (§6.4).

    ``connection_id`` must be the lower-case canonical UUID text; ``nonce`` is for tests only.
    """
    sealed = _seal(credentials_key, plaintext.encode("utf-8"), connection_id.encode("utf-8"), nonce)
    return base64.b64encode(sealed).decode("ascii")


def decrypt_credential(credentials_key: bytes, stored: str, connection_id: str) -> str:
    """Inverse of :func:`encrypt_credential`.

    Any failure (bad base64, short input, wrong key, wrong connection ID, non-UTF-8 plaintext)
    raises :class:`DecryptionError` with the message ``decryption failed``.
    """
    plain = _open(credentials_key, _b64decode(stored), connection_id.encode("utf-8"))
    try:
        return plain.decode("utf-8")
    except UnicodeDecodeError:
        raise DecryptionError from None


# --- §4.3.1 spool chunks ---------------------------------------------------------------------


def new_ephemeral_key() -> bytes:
    """A per-job spool key: 32 bytes from :func:`secrets.token_bytes`, kept only in memory."""
    return secrets.token_bytes(KEY_SIZE)


#: Domain label of the spool-chunk AAD, so a chunk can never pass for another kind of blob.
_SPOOL_AAD_LABEL = b"fetcher-spool-chunk-v1"


def spool_chunk_aad(index: int, final: bool) -> bytes:
    """The AAD of spool chunk ``index`` (§13): label ‖ index (8 bytes, big-endian) ‖ final flag.

    Binding the position makes a reordered or dropped chunk fail authentication; binding the
    flag makes a spool cut after a non-final chunk, or extended past the final one, detectable.
    """
    if index < 0:
        raise ValueError("chunk index must be non-negative")
    return _SPOOL_AAD_LABEL + index.to_bytes(8, "big") + (b"\x01" if final else b"\x00")


def seal_chunk(key: bytes, data: bytes, *, index: int, final: bool) -> bytes:
    """Encrypt spool chunk ``index``: raw ``nonce(12) ‖ ct ‖ tag(16)``, fresh random nonce and
    AAD = :func:`spool_chunk_aad` (§4.3.1, §13)."""
    return _seal(key, data, spool_chunk_aad(index, final), None)


def open_chunk(key: bytes, blob: bytes, *, index: int, final: bool) -> bytes:
    """Decrypt a :func:`seal_chunk` blob expected at ``index`` (``final`` when it must be the
    last); raises :class:`DecryptionError` on any failure, a wrong position included."""
    return _open(key, blob, spool_chunk_aad(index, final))
