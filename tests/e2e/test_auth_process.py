"""§12 through real ``fetcher run`` processes (embedded mode: no external server needed).

* ``AUTH_MODE=jwt`` over a JWKS served on loopback that is *down* when the process starts:
  the start is not refused, a bearer token gets ``503 FET-0003`` and ``/readyz`` reports
  ``auth_keys`` down; once the JWKS answers (the backoff retries it), RS256, PS256, ES256 and
  EdDSA tokens are accepted and the rest stays refused. No token ever appears in the logs.
* ``AUTH_JWT_SECRET`` with a token from ``fetcher dev-token``, used as an operator would.
* ``AUTH_MODE=none`` on every interface logs the §12.1 warning once; on loopback it does not.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from pathlib import Path

import httpx

from tests.e2e.conftest import E2E
from tests.e2e.harness import (
    FETCHER_BIN,
    MASTER_KEY,
    ProcessLauncher,
    embedded_fetcher,
    eventually,
    free_port,
)
from tests.fakes.jwks_harness import SECRET_B64
from tests.fakes.jwks_server import ISSUER, JwksServer, SigningKey, claims, ec, ed25519_key, rsa

pytestmark = E2E

PROBE = f"/v1/fetcher/{uuid.uuid4()}"
WARNING = "authentication is off: every caller can manage connections, create jobs and read events"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_jwks_down_at_start_then_every_algorithm(tmp_path: Path) -> None:
    rsa_key = rsa("r")
    keys = [rsa_key, SigningKey("r", "PS256", rsa_key.private), ec("e"), ed25519_key("d")]
    jwks = JwksServer(keys[0], keys[2], keys[3])  # not started: the JWKS is down
    env = {"AUTH_MODE": "jwt", "AUTH_ISSUER": ISSUER, "AUTH_JWKS_URL": jwks.url}
    tokens: list[str] = []
    try:
        async with (
            embedded_fetcher(tmp_path, LOG_LEVEL="info", **env) as process,
            httpx.AsyncClient(base_url=process.base_url, timeout=10.0) as http,
        ):
            early = keys[0].sign(claims())
            tokens.append(early)
            waiting = await http.get(PROBE, headers=bearer(early))
            assert waiting.status_code == 503, waiting.text
            assert waiting.json()["code"] == "FET-0003"
            assert (await http.get(PROBE)).status_code == 401
            ready = await http.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["checks"]["auth_keys"]["status"] == "down"

            jwks.start()

            async def keys_up() -> bool | None:
                body = (await http.get("/readyz")).json()
                return True if body["checks"]["auth_keys"]["status"] == "up" else None

            await eventually(keys_up, "auth_keys up", within=40.0)
            assert (await http.get("/readyz")).status_code == 200
            for key in keys:
                token = key.sign(claims())
                tokens.append(token)
                answer = await http.get(PROBE, headers=bearer(token))
                assert answer.status_code == 404, (key.alg, answer.text)
            refused = {
                "expired": keys[2].sign(claims(exp=int(time.time()) - 120)),
                "wrong aud": keys[3].sign(claims(audience="other")),
                "unknown kid": rsa("nobody").sign(claims()),
            }
            tokens.extend(refused.values())
            for case, token in refused.items():
                answer = await http.get(PROBE, headers=bearer(token))
                assert answer.status_code == 401, case
                assert answer.headers["www-authenticate"] == (
                    'Bearer realm="fetcher", error="invalid_token"'
                )
            listed = await http.get("/v1/management/connections", headers=bearer(tokens[1]))
            assert listed.status_code == 200, listed.text
            logs = process.logs()
    finally:
        jwks.stop()
    assert "JWKS fetch failed" in logs
    assert "authentication failed" in logs
    for token in tokens:
        assert token.split(".")[2] not in logs
        assert token.split(".")[1] not in logs


async def test_dev_token_against_a_protected_process(tmp_path: Path) -> None:
    env = {"AUTH_MODE": "jwt", "AUTH_ISSUER": ISSUER, "AUTH_JWT_SECRET": SECRET_B64}
    minted = await asyncio.to_thread(
        subprocess.run,
        [FETCHER_BIN, "dev-token", "--sub", "ops", "--scope", "fetcher:connections:read"],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    async with (
        embedded_fetcher(tmp_path, LOG_LEVEL="info", **env) as process,
        httpx.AsyncClient(base_url=process.base_url, timeout=10.0) as http,
    ):
        listed = await http.get("/v1/management/connections", headers=bearer(token))
        assert listed.status_code == 200, listed.text
        assert (await http.get("/v1/management/connections")).status_code == 401
        denied = await http.get("/v1/events", headers=bearer(token))
        assert denied.status_code == 403
        assert denied.json()["message"] == "token lacks scope fetcher:events:read"
        logs = process.logs()
    assert token not in logs
    assert SECRET_B64 not in logs
    assert WARNING not in logs


def _warnings(logs: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == WARNING]


async def test_unauthenticated_warning_on_every_interface(tmp_path: Path) -> None:
    base = {
        "PATH": "/usr/bin:/bin",
        "APP_ENC_KEY": MASTER_KEY,
        "FETCHER_MODE": "embedded",
        "READYZ_DRAIN_DELAY_SEC": "0",
    }
    async with httpx.AsyncClient(timeout=10.0) as http:
        launcher = ProcessLauncher(base, tmp_path, http, secrets=(MASTER_KEY,))
        try:
            for name, host, expected in (("all", "0.0.0.0", 1), ("loopback", "127.0.0.1", 0)):  # noqa: S104
                state = tmp_path / name
                state.mkdir()
                port = free_port()
                env = {
                    **base,
                    "DATABASE_URL": f"sqlite:///{state / 'meta.db'}",
                    "OBJECT_STORAGE_LOCAL_DIR": str(state / "objects"),
                    "SERVER_ADDRESS": f"{host}:{port}",
                }
                started = launcher._spawn(name, env, f"http://127.0.0.1:{port}")
                await started.wait_healthy(http)
                found = _warnings(started.logs())
                assert len(found) == expected, started.log_tail()
                assert all(line["level"] in ("warn", "warning") for line in found)
                await started.terminate()
        finally:
            await launcher.stop_all()
