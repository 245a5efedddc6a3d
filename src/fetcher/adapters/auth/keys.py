"""A parsed key set (contract §12.2): which verification keys a token may name.

A JWKS document becomes a :class:`KeyRing`: for each ``kid`` the keys it names, each bound to
one accepted algorithm (PyJWT's :class:`~jwt.PyJWK` fixes the algorithm it verifies with, so a
token's ``alg`` selects among configured key/algorithm pairs and can never reinterpret a key).

* ``RSA`` keys verify ``RS256`` and ``PS256`` (or only their ``alg`` when the JWK names one);
  ``EC`` keys on ``P-256`` verify ``ES256``; ``OKP`` keys on ``Ed25519`` verify ``EdDSA``
  (§12.2: Ed448 is not required). Any other key, a key for encryption (``use`` ``enc``) and a
  key whose ``alg`` is not accepted are skipped: they can verify nothing.
* The HS256 secret (``AUTH_JWT_SECRET``) is a one-key ring without a ``kid`` (§12.2: HS256
  only with the secret, never with a JWKS).

Parsing builds ``cryptography`` key objects once, so a request only looks a key up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jwt import PyJWK
from jwt.exceptions import PyJWTError

__all__ = ["JWKS_ALGORITHMS", "SECRET_ALGORITHM", "KeyRing", "KeySetError", "parse_jwks"]

#: §12.2: the algorithms a JWKS key may verify.
JWKS_ALGORITHMS = frozenset({"RS256", "PS256", "ES256", "EdDSA"})
#: §12.2: the one algorithm of ``AUTH_JWT_SECRET``.
SECRET_ALGORITHM = "HS256"  # noqa: S105 - an algorithm name, not a secret

#: The algorithms each key type can verify when the JWK names none.
_BY_TYPE: Mapping[tuple[str, str | None], tuple[str, ...]] = {
    ("RSA", None): ("RS256", "PS256"),
    ("EC", "P-256"): ("ES256",),
    ("OKP", "Ed25519"): ("EdDSA",),
}


class KeySetError(Exception):
    """A JWKS document that is not a key set with at least one usable key."""


@dataclass(frozen=True, slots=True)
class KeyRing:
    """Verification keys by ``kid`` (``None``: a key without one), then by algorithm."""

    keys: Mapping[str | None, Mapping[str, Any]] = field(default_factory=dict)

    def key_for(self, kid: str | None, alg: str) -> Any | None:
        """The key ``kid`` names for ``alg``, or ``None`` (unknown ``kid`` or unfit ``alg``)."""
        return self.keys.get(kid, {}).get(alg)

    def knows(self, kid: str | None) -> bool:
        return kid in self.keys

    @classmethod
    def secret(cls, key: bytes) -> KeyRing:
        """The HS256 ring of ``AUTH_JWT_SECRET`` (the decoded bytes, §12.2)."""
        return cls({None: {SECRET_ALGORITHM: key}})

    def __len__(self) -> int:
        return sum(len(v) for v in self.keys.values())


def parse_jwks(document: bytes) -> KeyRing:
    """The usable keys of a JWKS document; :class:`KeySetError` when it has none."""
    try:
        parsed = json.loads(document)
    except (ValueError, UnicodeDecodeError):
        raise KeySetError("the JWKS document is not JSON") from None
    members = parsed.get("keys") if isinstance(parsed, dict) else None
    if not isinstance(members, list):
        raise KeySetError("the JWKS document has no keys array")
    ring: dict[str | None, dict[str, Any]] = {}
    for member in members:
        if isinstance(member, dict):
            for alg, key in _usable(member).items():
                ring.setdefault(_kid(member), {})[alg] = key
    if not ring:
        raise KeySetError("the JWKS document has no usable key")
    return KeyRing(ring)


def _kid(member: Mapping[str, Any]) -> str | None:
    kid = member.get("kid")
    return kid if isinstance(kid, str) else None


def _usable(member: dict[str, Any]) -> dict[str, PyJWK]:
    """Each accepted algorithm ``member`` can verify, with its key bound to it."""
    if member.get("use", "sig") != "sig":
        return {}
    kty, crv = member.get("kty"), member.get("crv")
    algs = _BY_TYPE.get((str(kty), None if kty == "RSA" else str(crv)), ())
    named = member.get("alg")
    if named is not None:
        algs = tuple(a for a in algs if a == named)
    usable: dict[str, PyJWK] = {}
    for alg in algs:
        try:
            usable[alg] = PyJWK(member, algorithm=alg)
        except PyJWTError:
            continue  # a malformed key: skipped like any other unusable member
    return usable
