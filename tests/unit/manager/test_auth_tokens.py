"""§12.2 through a running Manager app: tokens from a real JWKS on loopback (RS256, PS256,
ES256, EdDSA) or the HS256 secret are accepted; every malformed, forged or out-of-date token
is a 401 with the exact body and challenge; the 503 window before a key set is loaded.

The probe route is ``GET /v1/fetcher/{id}`` for an unknown job: an accepted token reaches the
route (404 FET-1001), a refused one never does (401).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from fetcher.adapters.auth.cache import MAX_ENTRIES, VerifiedTokens
from fetcher.adapters.auth.keys import KeyRing
from fetcher.services.principal import Principal
from tests.fakes.jwks_harness import SECRET, auth_app, jwks_env, secret_env
from tests.fakes.jwks_server import (
    JwksServer,
    SigningKey,
    claims,
    ec,
    ed25519_key,
    free_port,
    rsa,
)

PROBE = f"/v1/fetcher/{uuid.uuid4()}"
UNAUTHORIZED = {
    "code": "FET-0010",
    "title": "Unauthorized",
    "message": "missing or invalid bearer token",
}
CHALLENGE = 'Bearer realm="fetcher"'
INVALID = 'Bearer realm="fetcher", error="invalid_token"'


def assert_401(response: httpx.Response, challenge: str = INVALID) -> None:
    assert response.status_code == 401, response.text
    assert response.json() == UNAUTHORIZED
    assert response.headers["www-authenticate"] == challenge


def assert_passed(response: httpx.Response) -> None:
    """The token was accepted: the route ran and found no such job."""
    assert response.status_code == 404, response.text
    assert response.json()["code"] == "FET-1001"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(header: dict[str, Any], payload: dict[str, Any], sign: Callable[[bytes], bytes]) -> str:
    """A token built by hand (what no honest library would sign)."""
    head = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(payload).encode())
    return head + "." + _b64(sign(head.encode()))


KEYS = {"rsa": rsa(), "ps": rsa("ps-1", "PS256"), "ec": ec(), "ed": ed25519_key()}


@pytest.fixture(scope="module")
def server() -> Any:
    with JwksServer(*KEYS.values()).running() as running:
        yield running


@pytest.mark.parametrize("name", ["rsa", "ps", "ec", "ed"])
async def test_jwks_algorithms_are_accepted(server: JwksServer, tmp_path: Path, name: str) -> None:
    async with auth_app(tmp_path, jwks_env(server.url)) as app:
        assert_passed(await app.get(PROBE, KEYS[name].sign(claims())))


async def test_an_rsa_key_without_alg_verifies_rs256_and_ps256(
    server: JwksServer, tmp_path: Path
) -> None:
    key = KEYS["rsa"]
    pss = SigningKey(key.kid, "PS256", key.private)
    async with auth_app(tmp_path, jwks_env(server.url)) as app:
        assert_passed(await app.get(PROBE, pss.sign(claims())))


async def test_an_rsa_key_with_alg_verifies_only_that_alg(tmp_path: Path) -> None:
    key = rsa("pinned")
    key.extra = {"alg": "RS256"}
    with JwksServer(key).running() as jwks:
        async with auth_app(tmp_path, jwks_env(jwks.url)) as app:
            assert_passed(await app.get(PROBE, key.sign(claims())))
            pss = SigningKey(key.kid, "PS256", key.private)
            assert_401(await app.get(PROBE, pss.sign(claims())))


async def test_audience_array_and_leeway(server: JwksServer, tmp_path: Path) -> None:
    key = KEYS["ec"]
    now = int(time.time())
    async with auth_app(tmp_path, jwks_env(server.url, AUTH_LEEWAY_SECONDS="60")) as app:
        assert_passed(await app.get(PROBE, key.sign(claims(audience=["other", "fetcher"]))))
        # Within the leeway: expired 30 s ago, valid from 30 s ahead.
        assert_passed(await app.get(PROBE, key.sign(claims(exp=now - 30))))
        assert_passed(await app.get(PROBE, key.sign(claims(nbf=now + 30, iat=now + 30))))


def _rejected() -> dict[str, Callable[[], str]]:
    key = KEYS["rsa"]

    def now() -> int:  # when the token is made, not when the module is imported
        return int(time.time())

    pem = key.public_pem()

    def tampered() -> str:
        """A valid token whose payload is replaced: still unexpired, so only the signature
        can refuse it."""
        head, _payload, signature = key.sign(claims()).split(".")
        body = {**claims(), "scope": "fetcher:admin extra", "sub": "mallory"}
        return ".".join([head, _b64(json.dumps(body).encode()), signature])

    def hs256_with_public_pem() -> str:
        header = {"alg": "HS256", "kid": key.kid, "typ": "JWT"}
        return forge(header, claims(), lambda m: hmac.new(pem, m, hashlib.sha256).digest())

    return {
        "expired": lambda: key.sign(claims(exp=now() - 100)),
        "not yet valid (nbf)": lambda: key.sign(claims(nbf=now() + 100)),
        "issued in the future (iat)": lambda: key.sign(claims(iat=now() + 100)),
        "no exp": lambda: key.sign(claims(exp=None)),
        "exp as a string": lambda: key.sign(claims(exp=str(now() + 300))),
        "wrong iss": lambda: key.sign(claims(issuer="https://evil.test")),
        "no iss": lambda: key.sign({k: v for k, v in claims().items() if k != "iss"}),
        "wrong aud": lambda: key.sign(claims(audience="someone-else")),
        "aud array without ours": lambda: key.sign(claims(audience=["a", "b"])),
        "no aud": lambda: key.sign({k: v for k, v in claims().items() if k != "aud"}),
        "alg none": lambda: forge({"alg": "none", "kid": key.kid}, claims(), lambda m: b""),
        "alg none without kid": lambda: forge({"alg": "none"}, claims(), lambda m: b""),
        "HS256 signed with the RSA public key PEM": hs256_with_public_pem,
        "RS384 (not accepted)": lambda: SigningKey(key.kid, "RS384", key.private).sign(claims()),
        "unknown kid": lambda: rsa("nobody").sign(claims()),
        "no kid": lambda: jwt.encode(claims(), key.private, algorithm="RS256"),
        "alg of another key type": lambda: SigningKey(KEYS["ec"].kid, "RS256", key.private).sign(
            claims()
        ),
        "signed by another key under a known kid": lambda: SigningKey(
            key.kid, "RS256", rsa().private
        ).sign(claims()),
        "tampered payload": tampered,
        "truncated signature": lambda: key.sign(claims())[:-4],
        "over 8 KiB": lambda: key.sign(claims(padding="x" * 8200)),
        "not a JWT": lambda: "not-a-token",
        "empty sub": lambda: key.sign(claims(sub="")),
        "sub of 257 characters": lambda: key.sign(claims(sub="s" * 257)),
        "sub not a string": lambda: key.sign(claims(sub=7)),
        "products not an array": lambda: key.sign(claims(products="payments")),
        "products with a non-string": lambda: key.sign(claims(products=["payments", 3])),
        "products with an invalid name": lambda: key.sign(claims(products=["bad name!"])),
        "products with a blank name": lambda: key.sign(claims(products=["  "])),
        "products with a name over 100 chars": lambda: key.sign(claims(products=["p" * 101])),
    }


REJECTED = _rejected()


@pytest.mark.parametrize("case", sorted(REJECTED))
async def test_rejected_tokens(server: JwksServer, tmp_path: Path, case: str) -> None:
    token = REJECTED[case]()
    async with auth_app(tmp_path, jwks_env(server.url)) as app:
        assert_401(await app.get(PROBE, token))


async def test_a_token_of_exactly_8_kib_is_measured_not_refused(
    server: JwksServer, tmp_path: Path
) -> None:
    """The 8 KiB bound is on the token's size: one just under it passes."""
    key = KEYS["ed"]
    base = len(key.sign(claims(padding="")))
    token = key.sign(claims(padding="x" * ((8192 - base) * 3 // 4)))
    assert 8000 < len(token) <= 8192
    async with auth_app(tmp_path, jwks_env(server.url)) as app:
        assert_passed(await app.get(PROBE, token))


async def test_products_and_scopes_reach_the_principal(server: JwksServer, tmp_path: Path) -> None:
    token = KEYS["ec"].sign(
        claims(products=[" Payments ", "ledger"], scope="a b", scp=["c", 4], tenantId="acme")
    )
    request = httpx.Request("GET", "http://x/", headers={"Authorization": f"Bearer {token}"})
    async with auth_app(tmp_path, jwks_env(server.url)) as app:
        principal = await app.authenticator.authenticate(request)
    assert principal.products == frozenset({"payments", "ledger"})
    assert principal.scopes == frozenset({"a", "b", "c"})
    assert principal.sub == "alice"
    assert principal.tenant == ""  # single-tenant mode ignores the tenant claim


@pytest.mark.parametrize(
    ("header", "challenge"),
    [
        (None, CHALLENGE),
        ("Basic YWxpY2U6c2VjcmV0", CHALLENGE),
        ("Bearer", CHALLENGE),
        ("Bearer    ", CHALLENGE),
        ("bearer garbage", INVALID),
        ("BEARER garbage", INVALID),
        ("Bearer garbage", INVALID),
    ],
)
async def test_challenge_follows_the_authorization_header(
    tmp_path: Path, header: str | None, challenge: str
) -> None:
    async with auth_app(tmp_path, secret_env()) as app:
        headers = {} if header is None else {"Authorization": header}
        assert_401(await app.client.get(PROBE, headers=headers), challenge)


async def test_hs256_secret_mode(tmp_path: Path) -> None:
    async with auth_app(tmp_path, secret_env()) as app:
        assert_passed(await app.get(PROBE, jwt.encode(claims(), SECRET, algorithm="HS256")))
        # The base64 text is not the key (§12.2: the decoded bytes are).
        text_key = b"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYtdGVzdC1zZWNyZXQ="
        assert_401(await app.get(PROBE, jwt.encode(claims(), text_key, algorithm="HS256")))
        # Only HS256 with the secret: an RS256 token and an HS512 one are refused.
        assert_401(await app.get(PROBE, KEYS["rsa"].sign(claims())))
        hs512 = forge(
            {"alg": "HS512"}, claims(), lambda m: hmac.new(SECRET, m, hashlib.sha512).digest()
        )
        assert_401(await app.get(PROBE, hs512))


async def test_reason_logged_token_never(
    server: JwksServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = KEYS["rsa"].sign(claims(exp=int(time.time()) - 100))
    caplog.set_level(logging.INFO)
    async with auth_app(tmp_path, jwks_env(server.url)) as app:
        assert_401(await app.get(PROBE, token))
    lines = [r for r in caplog.records if r.getMessage().startswith("authentication failed")]
    assert lines, caplog.text
    assert lines[0].levelno == logging.INFO
    assert "expired" in lines[0].getMessage().lower()
    assert token not in caplog.text
    assert token.split(".")[2] not in caplog.text


async def test_503_until_the_jwks_is_loaded_then_recovery(tmp_path: Path) -> None:
    key = rsa("late")
    jwks = JwksServer(key, port=free_port())  # nothing listens there yet
    async with auth_app(tmp_path, jwks_env(jwks.url), wait=False) as app:
        app.authenticator.start()
        token = key.sign(claims())
        answer = await app.get(PROBE, token)
        assert answer.status_code == 503, answer.text
        assert answer.json()["code"] == "FET-0003"
        assert_401(await app.get(PROBE), CHALLENGE)  # without a token: still 401
        ready = await app.client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["auth_keys"]["status"] == "down"
        with jwks.running():
            await app.wait_for_keys(within=15.0)  # the 1 s, 2 s, … backoff reaches it
            assert_passed(await app.get(PROBE, token))
            ready = await app.client.get("/readyz")
            assert ready.json()["checks"]["auth_keys"]["status"] == "up", ready.text


async def test_a_remembered_token_still_expires(server: JwksServer, tmp_path: Path) -> None:
    """Accepted tokens are remembered (no second verification) only until their ``exp``."""
    key = KEYS["ed"]
    token = key.sign(claims(exp=int(time.time()) + 2))
    async with auth_app(tmp_path, jwks_env(server.url, AUTH_LEEWAY_SECONDS="0")) as app:
        assert_passed(await app.get(PROBE, token))
        assert_passed(await app.get(PROBE, token))  # from memory
        assert len(app.authenticator._verified) == 1
        await asyncio.sleep(2.2)
        assert_401(await app.get(PROBE, token))


def test_verified_memory_rules() -> None:
    now = [1000.0]
    memory = VerifiedTokens(clock=lambda: now[0])
    ring, other = KeyRing.secret(b"k" * 32), KeyRing.secret(b"k" * 32)
    alice = Principal(sub="alice")
    digest = memory.digest("token-a")
    assert memory.get(digest, ring) is None
    memory.put(digest, ring, alice, exp=1010.0)
    assert memory.get(digest, ring) is alice
    now[0] = 1010.0  # at exp: forgotten
    assert memory.get(digest, ring) is None
    memory.put(digest, ring, alice, exp=10_000.0)
    now[0] = 1010.0 + 300.0  # at most MAX_AGE_SECONDS, whatever exp says
    assert memory.get(digest, ring) is None
    memory.put(digest, ring, alice, exp=10_000.0)
    assert memory.get(digest, other) is None  # a new key set: everything is forgotten
    assert memory.get(digest, ring) is None
    for i in range(MAX_ENTRIES + 5):
        memory.put(memory.digest(str(i)), ring, alice, exp=10_000.0)
    assert len(memory) == MAX_ENTRIES
    assert memory.get(memory.digest("0"), ring) is None  # the oldest went first
    assert memory.get(memory.digest(str(MAX_ENTRIES + 4)), ring) is alice
