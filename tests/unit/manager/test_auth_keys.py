"""§12.2 key handling and §12.4/§12.5 identity through a running Manager app: JWKS rotation
picked up without a restart (periodic refresh, and the rate-limited unknown-``kid`` refetch), a
failed refresh keeping the last good set, the fetch bounds, the multi-tenant ``tenant`` claim,
and ``sub``/``tenant`` on every log line of an authenticated request."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from fetcher.adapters.auth import JwksSource, parse_jwks
from fetcher.adapters.auth.jwks import MAX_JWKS_BYTES
from fetcher.adapters.auth.keys import KeySetError
from fetcher.services.log_context import current_log_context
from tests.fakes.jwks_harness import SECRET, AuthApp, auth_app, jwks_env, secret_env
from tests.fakes.jwks_server import JwksServer, SigningKey, claims, ec, ed25519_key, rsa
from tests.unit.manager.conftest import pg_body

PROBE = f"/v1/fetcher/{uuid.uuid4()}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def swap_source(app: AuthApp, source: JwksSource) -> None:
    """Run the app's authenticator over ``source`` (timings the settings cannot express)."""
    await app.authenticator.keys.aclose()
    app.authenticator.keys = source
    await app.wait_for_keys()


async def status(app: AuthApp, key: SigningKey, **extra: Any) -> int:
    return (await app.get(PROBE, key.sign(claims(**extra)))).status_code


async def test_rotation_by_periodic_refresh(tmp_path: Path) -> None:
    old, new = rsa("old"), ec("new")
    with JwksServer(old).running() as server:
        async with auth_app(tmp_path, jwks_env(server.url)) as app:
            await swap_source(app, JwksSource(server.url, refresh_seconds=0.3))
            assert await status(app, old) == 404
            assert await status(app, new) == 401  # unknown kid, a fetch just started
            server.keys = [new]  # the issuer rotates: the old key is withdrawn
            async with asyncio.timeout(5):
                while await status(app, new) != 404:  # noqa: ASYNC110 - polls over HTTP
                    await asyncio.sleep(0.1)
            assert await status(app, old) == 401


async def test_unknown_kid_refetch_is_rate_limited(tmp_path: Path) -> None:
    first, second, third = rsa("k1"), ed25519_key("k2"), ec("k3")
    clock = Clock()
    with JwksServer(first).running() as server:
        async with auth_app(tmp_path, jwks_env(server.url)) as app:
            await swap_source(app, JwksSource(server.url, refresh_seconds=3600, clock=clock))
            fetched = server.fetches
            server.keys = [first, second]
            clock.now += 29.9  # the last fetch started < 30 s ago: no refetch
            assert await status(app, second) == 401
            assert server.fetches == fetched
            clock.now += 0.1  # 30 s: an unknown kid refetches, and the new key verifies
            assert await status(app, second) == 404
            assert server.fetches == fetched + 1
            assert await status(app, third) == 401  # at once again: rate-limited
            assert server.fetches == fetched + 1
            made_up = [SigningKey(f"x{i}", "RS256", first.private) for i in range(20)]
            answers = await asyncio.gather(*(status(app, k) for k in made_up))
            assert set(answers) == {401}
            assert server.fetches == fetched + 1  # a flood of kids is not a flood of fetches
            assert await status(app, first) == 404


async def test_a_failed_refresh_keeps_the_last_good_set(tmp_path: Path) -> None:
    key = rsa("kept")
    server = JwksServer(key)
    server.start()
    try:
        async with auth_app(tmp_path, jwks_env(server.url)) as app:
            await swap_source(app, JwksSource(server.url, refresh_seconds=0.2))
            server.stop()
            before = server.fetches
            await asyncio.sleep(0.8)  # refreshes fail (connection refused)
            assert await status(app, key) == 404
            ready = (await app.client.get("/readyz")).json()
            assert ready["checks"]["auth_keys"]["status"] == "up"
            server.raw = b'{"keys": []}'  # back, but serving an unusable set
            server.start()
            await asyncio.sleep(0.8)
            assert server.fetches > before
            assert await status(app, key) == 404
    finally:
        server.stop()


async def test_file_jwks(tmp_path: Path) -> None:
    key = ed25519_key("file")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [key.jwk()]}))
    async with auth_app(tmp_path, jwks_env(path.as_uri())) as app:
        assert await status(app, key) == 404


async def _load(url: str) -> JwksSource:
    source = JwksSource(url, refresh_seconds=3600)
    try:
        await source.refetch_unknown()
    finally:
        await source.aclose()
    return source


async def test_fetch_bounds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b'{"keys": [' + b" " * MAX_JWKS_BYTES + b"]}")
    assert (await _load(big.as_uri())).ring is None
    key = rsa("ok")
    with JwksServer(key).running() as server:
        assert (await _load(server.url)).ring is not None
        assert (await _load(server.url.replace("jwks.json", "missing"))).ring is None
        server.raw = b'{"keys": [' + b" " * MAX_JWKS_BYTES + b"]}"
        assert (await _load(server.url)).ring is None
        server.raw = b"<html>"
        assert (await _load(server.url)).ring is None
    assert "JWKS fetch failed" in caplog.text


def test_only_usable_keys_are_kept() -> None:
    """§12.2: RSA (RS256/PS256), P-256 (ES256), Ed25519 (EdDSA); anything else is skipped."""
    rsa_key, ec_key, ed_key = rsa("r").jwk(), ec("e").jwk(), ed25519_key("d").jwk()
    members: list[Mapping[str, Any] | str] = [
        rsa_key,
        {**ec_key, "kid": "p384", "crv": "P-384"},
        {**rsa_key, "kid": "rs512", "alg": "RS512"},
        {**rsa_key, "kid": "enc", "use": "enc"},
        {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
        {**ed_key, "kid": "ed448", "crv": "Ed448"},
        {"kty": "RSA", "kid": "broken", "n": "AQAB"},
        "not an object",
        ec_key,
        ed_key,
    ]
    ring = parse_jwks(json.dumps({"keys": members}).encode())
    assert set(ring.keys) == {"r", "e", "d"}
    assert set(ring.keys["r"]) == {"RS256", "PS256"}
    assert set(ring.keys["e"]) == {"ES256"}
    assert set(ring.keys["d"]) == {"EdDSA"}
    for document in (b"[]", b"{}", b'{"keys": {}}', b'{"keys": [{"kty": "oct", "k": "eA"}]}'):
        with pytest.raises(KeySetError):
            parse_jwks(document)


MULTI = {"MULTI_TENANT_ENABLED": "true"}


def hs(**extra: Any) -> str:
    return jwt.encode(claims(**extra), SECRET, algorithm="HS256")


def request(token: str) -> httpx.Request:
    return httpx.Request("GET", "http://x/", headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize(
    "tenant", [None, "", "Acme", "-acme", "_acme", "acme corp", "a" * 64, 7, ["acme"], "acmé"]
)
async def test_multi_tenant_needs_a_wellformed_tenant(tmp_path: Path, tenant: Any) -> None:
    async with auth_app(tmp_path, secret_env(**MULTI)) as app:
        response = await app.get(PROBE, hs(tenantId=tenant))
        assert response.status_code == 401, response.text
        assert response.json()["code"] == "FET-0010"


@pytest.mark.parametrize("tenant", ["acme", "0", "a" * 63, "glo-bex_2"])
async def test_multi_tenant_principal(tmp_path: Path, tenant: str) -> None:
    async with auth_app(tmp_path, secret_env(**MULTI)) as app:
        principal = await app.authenticator.authenticate(request(hs(tenantId=tenant)))
        assert principal.tenant == tenant
        assert (await app.get(PROBE, hs(tenantId=tenant))).status_code == 404


async def test_the_tenant_claim_name_is_configurable(tmp_path: Path) -> None:
    async with auth_app(tmp_path, secret_env(AUTH_TENANT_CLAIM="org", **MULTI)) as app:
        assert (await app.get(PROBE, hs(tenantId="acme"))).status_code == 401
        principal = await app.authenticator.authenticate(request(hs(org="acme")))
        assert principal.tenant == "acme"


class ContextRecorder(logging.Handler):
    """Keeps each record with the log context bound when it was emitted (what the JSON
    formatter writes as fields)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[str, dict[str, str]]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.getMessage(), dict(current_log_context())))


@pytest.mark.parametrize("multi", [False, True], ids=["single-tenant", "multi-tenant"])
async def test_log_lines_carry_sub_and_tenant(tmp_path: Path, multi: bool) -> None:
    recorder = ContextRecorder()
    root = logging.getLogger()
    root.addHandler(recorder)
    level = root.level
    root.setLevel(logging.INFO)
    token = hs(sub="svc-ledger", tenantId="acme")
    headers = {"Authorization": f"Bearer {token}", "X-Product-Name": "payments"}
    try:
        async with auth_app(tmp_path, secret_env(**(MULTI if multi else {}))) as app:
            created = await app.client.post(
                "/v1/management/connections", json=pg_body(), headers=headers
            )
            assert created.status_code == 201, created.text
            body = {
                "dataRequest": {"mappedFields": {"pg_main": {"accounts": ["id"]}}},
                "metadata": {"source": "payments"},
            }
            job = await app.client.post("/v1/fetcher", json=body, headers=headers)
            assert job.status_code == 202, job.text
    finally:
        root.removeHandler(recorder)
        root.setLevel(level)
    served = [ctx for message, ctx in recorder.lines if message == "job created"]
    assert served, recorder.lines
    expected = {"sub": "svc-ledger", **({"tenant": "acme"} if multi else {})}
    for ctx in served:
        assert {k: ctx.get(k) for k in ("sub", "tenant") if k in ctx} == expected
        assert "request_id" in ctx
