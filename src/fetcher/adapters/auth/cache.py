"""A short memory of verified tokens, so a client that repeats its token pays the §12.2
verification once (bench/auth_cost.py: a signature check and two JSON parses cost ~0.2 ms on
the shared bench machine, a lookup a few microseconds).

Why the answer stays right:

* The key is the SHA-256 of the token, so a cached answer is the answer for exactly those
  bytes; the token itself is not kept.
* Only accepted tokens are remembered, and only until the token's own ``exp`` (without the
  leeway, so never longer than a fresh check would accept it) and at most
  :data:`MAX_AGE_SECONDS`.
* An entry belongs to the key set that verified it: when the JWKS is refreshed (a key may have
  been withdrawn) the whole memory is dropped.
* :data:`MAX_ENTRIES` bounds the memory; the least recently used entry goes first.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable

from fetcher.adapters.auth.keys import KeyRing
from fetcher.services.principal import Principal

__all__ = ["MAX_AGE_SECONDS", "MAX_ENTRIES", "VerifiedTokens"]

MAX_ENTRIES = 10_000
MAX_AGE_SECONDS = 300.0


class VerifiedTokens:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._ring: KeyRing | None = None
        self._entries: OrderedDict[bytes, tuple[Principal, float]] = OrderedDict()

    @staticmethod
    def digest(token: str) -> bytes:
        return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()

    def get(self, digest: bytes, ring: KeyRing) -> Principal | None:
        if ring is not self._ring:
            self._entries.clear()
            self._ring = ring
            return None
        entry = self._entries.get(digest)
        if entry is None:
            return None
        if self._clock() >= entry[1]:
            del self._entries[digest]
            return None
        self._entries.move_to_end(digest)
        return entry[0]

    def put(self, digest: bytes, ring: KeyRing, principal: Principal, exp: float) -> None:
        if ring is not self._ring:
            self._entries.clear()
            self._ring = ring
        self._entries[digest] = (principal, min(exp, self._clock() + MAX_AGE_SECONDS))
        self._entries.move_to_end(digest)
        while len(self._entries) > MAX_ENTRIES:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
