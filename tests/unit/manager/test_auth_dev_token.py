"""``fetcher dev-token`` (issue 8): a token the Manager configured with the same
``AUTH_JWT_SECRET`` accepts, with the requested subject, scopes, products, tenant and
lifetime; a clear refusal (exit 1) without the secret or the issuer."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from fetcher.cli.dev_token import dev_token_command, parse_ttl
from tests.fakes.jwks_harness import SECRET, SECRET_B64, auth_app, secret_env
from tests.fakes.jwks_server import ISSUER

ENV = {"AUTH_JWT_SECRET": SECRET_B64, "AUTH_ISSUER": ISSUER}


def run(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = dev_token_command(argv, ENV if env is None else env, out, err)
    return code, out.getvalue(), err.getvalue()


def decoded(token: str, audience: str = "fetcher") -> dict[str, Any]:
    claims: dict[str, Any] = jwt.decode(
        token, SECRET, algorithms=["HS256"], audience=audience, issuer=ISSUER
    )
    return claims


async def test_the_manager_accepts_the_token(tmp_path: Path) -> None:
    code, out, err = run(
        ["--sub", "dev", "--scope", "fetcher:jobs:read", "--product", " Payments ", "--ttl", "5m"]
    )
    assert (code, err) == (0, "")
    token = out.strip()
    assert out == token + "\n"
    async with auth_app(tmp_path, secret_env()) as app:
        request = httpx.Request("GET", "http://x/", headers={"Authorization": f"Bearer {token}"})
        principal = await app.authenticator.authenticate(request)
        assert principal.sub == "dev"
        assert principal.scopes == frozenset({"fetcher:jobs:read"})
        assert principal.products == frozenset({"payments"})
        response = await app.get(f"/v1/fetcher/{uuid.uuid4()}", token)
        assert response.status_code == 404, response.text
        denied = await app.get("/v1/events", token)
        assert denied.json()["message"] == "token lacks scope fetcher:events:read"
    claims = decoded(token)
    assert claims["iss"] == ISSUER
    assert claims["aud"] == "fetcher"
    assert isinstance(claims["exp"], int)
    assert isinstance(claims["iat"], int)
    assert claims["exp"] - claims["iat"] == 300
    assert abs(claims["iat"] - time.time()) < 5
    assert "tenantId" not in claims


def test_scopes_tenant_audience_and_claim_name() -> None:
    env = {**ENV, "AUTH_AUDIENCE": "api://f", "AUTH_TENANT_CLAIM": "org"}
    code, out, _ = run(
        [
            "--sub",
            "s",
            "--scope",
            "fetcher:jobs:read fetcher:jobs:write",
            "--scope",
            "fetcher:events:read",
            "--tenant",
            "acme",
        ],
        env,
    )
    assert code == 0
    claims = decoded(out.strip(), audience="api://f")
    assert claims["scope"] == "fetcher:jobs:read fetcher:jobs:write fetcher:events:read"
    assert claims["org"] == "acme"
    assert claims["exp"] - claims["iat"] == 3600  # the default --ttl 1h
    assert "products" not in claims  # no --product: unrestricted


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"AUTH_ISSUER": ISSUER}, "AUTH_JWT_SECRET"),
        ({"AUTH_ISSUER": ISSUER, "AUTH_JWT_SECRET": "c2hvcnQ="}, "AUTH_JWT_SECRET"),
        ({"AUTH_JWT_SECRET": SECRET_B64}, "AUTH_ISSUER"),
    ],
)
def test_refuses_without_secret_or_issuer(env: dict[str, str], needle: str) -> None:
    code, out, err = run(["--sub", "s", "--scope", "fetcher:admin"], env)
    assert code == 1
    assert out == ""
    assert needle in err
    assert "c2hvcnQ=" not in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--sub", "s"],
        ["--scope", "fetcher:admin"],
        ["--sub", "", "--scope", "fetcher:admin"],
        ["--sub", "s", "--scope", "x", "--tenant", "Acme"],
        ["--sub", "s", "--scope", "x", "--product", "bad name"],
        ["--sub", "s", "--scope", "x", "--ttl", "0"],
        ["--sub", "s", "--scope", "x", "--ttl", "1w"],
        ["--sub", "s", "--scope", "x", "--bogus"],
    ],
)
def test_usage_errors(argv: list[str]) -> None:
    code, out, err = run(argv)
    assert (code, out) == (1, "")
    assert "usage: fetcher dev-token" in err


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("30m", 1800), ("1h", 3600), ("2d", 172800)]
)
def test_ttl(text: str, seconds: int) -> None:
    assert parse_ttl(text) == seconds


def test_through_the_console_script() -> None:
    binary = shutil.which("fetcher", path=str(Path(sys.executable).parent))
    assert binary is not None
    done = subprocess.run(  # noqa: S603 - our own console script
        [binary, "dev-token", "--sub", "cli", "--scope", "fetcher:admin"],
        env={"PATH": "/usr/bin:/bin", **ENV},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert decoded(done.stdout.strip())["sub"] == "cli"
    refused = subprocess.run(  # noqa: S603
        [binary, "dev-token", "--sub", "cli", "--scope", "fetcher:admin"],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert refused.returncode == 1
    assert "AUTH_JWT_SECRET" in refused.stderr
