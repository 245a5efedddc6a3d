"""HMAC-SHA256 in lower-case hex (CONTRACT §6.3 result HMAC, §7.3 and §8.5 signatures).

Verification is constant time (:func:`hmac.compare_digest`, §7.4 row 2) and exact: only the
lower-case hex form that Fetcher emits matches.
"""

from __future__ import annotations

import hashlib
import hmac as _hmac

__all__ = ["HmacStream", "hmac_hex", "verify_hex"]


def hmac_hex(key: bytes, data: bytes) -> str:
    """Lower-case hex HMAC-SHA256 of ``data`` under ``key``."""
    return _hmac.new(key, data, hashlib.sha256).hexdigest()


class HmacStream:
    """Incremental HMAC-SHA256, e.g. over a result document as it streams (§4.3 step 5)."""

    __slots__ = ("_mac",)

    def __init__(self, key: bytes) -> None:
        self._mac = _hmac.new(key, digestmod=hashlib.sha256)

    def update(self, data: bytes | memoryview) -> None:
        """Add ``data`` to the MAC input."""
        self._mac.update(data)

    def hexdigest(self) -> str:
        """Lower-case hex MAC of everything fed so far (the stream may continue)."""
        return self._mac.hexdigest()

    def __repr__(self) -> str:
        return "HmacStream(<hmac-sha256>)"


def verify_hex(key: bytes, data: bytes, signature: str | bytes) -> bool:
    """True when ``signature`` equals :func:`hmac_hex` of ``data``, compared in constant time."""
    expected = hmac_hex(key, data).encode("ascii")
    given = signature.encode("utf-8", "replace") if isinstance(signature, str) else signature
    return _hmac.compare_digest(expected, bytes(given))
