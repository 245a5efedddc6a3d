"""§2.10 ``/readyz/tenant/{id}`` and ``auth_keys``, and the §12.1 startup warning."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from fetcher.cli.run import UNAUTHENTICATED_WARNING, is_loopback_host, warn_if_unauthenticated
from fetcher.settings import Settings
from fetcher.worker.health import create_health_app
from tests.fakes.jwks_harness import auth_app, jwks_env, secret_env
from tests.fakes.jwks_server import JwksServer, rsa
from tests.unit.manager.conftest import base_env

MULTI = {"MULTI_TENANT_ENABLED": "true"}


@pytest.mark.parametrize("tenant", ["acme", "0", "a" * 63, "glo-bex_2"])
async def test_tenant_readiness_in_multi_tenant_mode(tmp_path: Path, tenant: str) -> None:
    async with auth_app(tmp_path, secret_env(**MULTI)) as app:
        plain = (await app.client.get("/readyz")).json()
        response = await app.client.get(f"/readyz/tenant/{tenant}")
        assert response.status_code == 200, response.text
        body = response.json()
        assert body.pop("tenant") == tenant
        for check in (*body["checks"].values(), *plain["checks"].values()):
            check["latency_ms"] = 0
        assert body == plain
        app.runtime.lifecycle.draining.set()  # the /readyz status follows
        draining = await app.client.get(f"/readyz/tenant/{tenant}")
        assert draining.status_code == 503
        assert draining.json()["tenant"] == tenant


@pytest.mark.parametrize("tenant", ["Acme", "-acme", "_x", "a" * 64, "acm%C3%A9", "a.b"])
async def test_unknown_tenant_is_fet_1081(tmp_path: Path, tenant: str) -> None:
    async with auth_app(tmp_path, secret_env(**MULTI)) as app:
        response = await app.client.get(f"/readyz/tenant/{tenant}")
        assert response.status_code == 404, response.text
        assert response.json() == {
            "code": "FET-1081",
            "title": "Tenant Not Found",
            "message": "tenant not found",
        }
        transport = httpx.ASGITransport(app=create_health_app(app.runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as worker:
            same = await worker.get(f"/readyz/tenant/{tenant}")
        assert (same.status_code, same.content) == (404, response.content)


async def test_single_tenant_jwt_is_still_fet_1080(tmp_path: Path) -> None:
    async with auth_app(tmp_path, secret_env()) as app:
        response = await app.client.get("/readyz/tenant/acme")
        assert response.status_code == 400
        assert response.json()["code"] == "FET-1080"


async def test_auth_keys_check_only_with_a_jwks(tmp_path: Path) -> None:
    async with auth_app(tmp_path, secret_env()) as app:
        assert "auth_keys" not in (await app.client.get("/readyz")).json()["checks"]
    with JwksServer(rsa()).running() as server:
        async with auth_app(tmp_path, jwks_env(server.url)) as app:
            ready = (await app.client.get("/readyz")).json()
            assert ready["checks"]["auth_keys"]["status"] == "up"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("::1", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("", False),
        ("0.0.0.0", False),  # noqa: S104 - the value under test
        ("::", False),
        ("10.1.2.3", False),
        ("fetcher.internal", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


@pytest.mark.parametrize(
    ("env", "warned"),
    [
        ({"SERVER_ADDRESS": ":4006"}, True),
        ({"SERVER_ADDRESS": "0.0.0.0:4006"}, True),
        ({"SERVER_ADDRESS": "[::]:4006"}, True),
        ({"SERVER_ADDRESS": "10.0.0.5:4006"}, True),
        ({"SERVER_ADDRESS": "127.0.0.1:4006"}, False),
        ({"SERVER_ADDRESS": "[::1]:4006"}, False),
        ({"SERVER_ADDRESS": "localhost:4006"}, False),
        ({"SERVER_ADDRESS": ":4006", **secret_env()}, False),
        ({"SERVER_ADDRESS": ":4006", "FETCHER_MODE": "manager"}, True),
    ],
)
def test_startup_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, env: dict[str, str], warned: bool
) -> None:
    mode = env.get("FETCHER_MODE", "embedded")
    settings = Settings.from_env({**base_env(tmp_path, mode), **env})
    caplog.set_level(logging.INFO)
    assert warn_if_unauthenticated(settings) is warned
    lines = [r for r in caplog.records if r.getMessage() == UNAUTHENTICATED_WARNING]
    assert len(lines) == (1 if warned else 0)
    assert all(r.levelno == logging.WARNING for r in lines)
    assert UNAUTHENTICATED_WARNING == (
        "authentication is off: every caller can manage connections, create jobs and read events"
    )


async def test_cors_lets_a_browser_send_the_token_and_read_the_challenge(tmp_path: Path) -> None:
    origin = "https://app.test"
    async with auth_app(tmp_path, secret_env(CORS_ALLOWED_ORIGINS=origin)) as app:
        preflight = await app.client.options(
            "/v1/events",
            headers={"Origin": origin, "Access-Control-Request-Method": "GET"},
        )
        assert preflight.status_code == 204
        allowed = preflight.headers["access-control-allow-headers"].lower()
        assert "authorization" in allowed.split(", ")
        denied = await app.client.get("/v1/events", headers={"Origin": origin})
        assert denied.status_code == 401
        exposed = denied.headers["access-control-expose-headers"].lower()
        assert "www-authenticate" in exposed.split(", ")
