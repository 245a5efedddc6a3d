"""A real JWKS endpoint on loopback for the §12.2 tests, with keys made by ``cryptography``.

:class:`JwksServer` serves ``GET /jwks.json`` over HTTP on 127.0.0.1 from a background thread
(the process under test fetches it exactly as it would an identity provider's). The published
keys can change while it runs (rotation), it counts fetches, and it can be started later on a
port chosen in advance (a JWKS that is down when the Manager starts).

:class:`SigningKey` holds a private key and signs tokens with PyJWT; ``jwk()`` is its public
JWK. ``rsa()``, ``ec()`` and ``ed25519()`` make fresh keys.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec as _ec
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.asymmetric import rsa as _rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

__all__ = ["ISSUER", "JwksServer", "SigningKey", "claims", "ec", "ed25519_key", "free_port", "rsa"]

ISSUER = "https://issuer.test"
AUDIENCE = "fetcher"


@dataclass
class SigningKey:
    """A private key, its ``kid`` and the algorithm it signs with."""

    kid: str
    alg: str
    private: Any
    extra: dict[str, Any] = field(default_factory=dict)

    def jwk(self) -> dict[str, Any]:
        """The public JWK (with ``kid`` and ``use``; ``alg`` only when ``extra`` sets it)."""
        public = self.private.public_key()
        if isinstance(public, _rsa.RSAPublicKey):
            data = RSAAlgorithm.to_jwk(public, as_dict=True)
        elif isinstance(public, _ec.EllipticCurvePublicKey):
            data = ECAlgorithm.to_jwk(public, as_dict=True)
        else:
            data = OKPAlgorithm.to_jwk(public, as_dict=True)
        return {**data, "kid": self.kid, "use": "sig", **self.extra}

    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        )

    def sign(self, payload: Mapping[str, Any], **headers: Any) -> str:
        header = {"kid": self.kid, **headers}
        return jwt.encode(dict(payload), self.private, algorithm=self.alg, headers=header)


def rsa(kid: str = "rsa-1", alg: str = "RS256") -> SigningKey:
    return SigningKey(kid, alg, _rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec(kid: str = "ec-1") -> SigningKey:
    return SigningKey(kid, "ES256", _ec.generate_private_key(_ec.SECP256R1()))


def ed25519_key(kid: str = "ed-1") -> SigningKey:
    return SigningKey(kid, "EdDSA", ed25519.Ed25519PrivateKey.generate())


def claims(
    *,
    sub: Any = "alice",
    scope: str | None = "fetcher:admin",
    ttl: int = 300,
    issuer: str = ISSUER,
    audience: str | list[str] = AUDIENCE,
    **extra: Any,
) -> dict[str, Any]:
    """A valid claim set (``extra`` adds or, with ``None``, removes claims)."""
    now = int(time.time())
    body: dict[str, Any] = {
        "iss": issuer,
        "aud": audience,
        "sub": sub,
        "iat": now,
        "exp": now + ttl,
    }
    if scope is not None:
        body["scope"] = scope
    body.update(extra)
    return {k: v for k, v in body.items() if v is not None}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class JwksServer:
    """``http://127.0.0.1:<port>/jwks.json`` serving :attr:`keys` (module docstring)."""

    def __init__(self, *keys: SigningKey, port: int | None = None) -> None:
        self.keys: list[SigningKey] = list(keys)
        self.port = port or free_port()
        self.fetches = 0
        self.raw: bytes | None = None  # a document to serve instead of the keys
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/jwks.json"

    def document(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return json.dumps({"keys": [k.jwk() for k in self.keys]}).encode()

    def start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.fetches += 1
                if self.path != "/jwks.json":
                    self.send_error(404)
                    return
                body = owner.document()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @contextmanager
    def running(self) -> Iterator[JwksServer]:
        self.start()
        try:
            yield self
        finally:
            self.stop()
