"""§9.1/§9.3 for ``AUTH_*`` and ``MULTI_TENANT_ENABLED``: every refusal with its exact reason
(never the secret), the defaults, and the values the Manager verifies tokens with."""

from __future__ import annotations

import base64

import pytest

from fetcher.settings import AuthMode, Settings, StartupRefused

KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
SECRET_BYTES = bytes(range(32))
SECRET = base64.b64encode(SECRET_BYTES).decode()
MANAGER = {
    "FETCHER_MODE": "manager",
    "APP_ENC_KEY": KEY,
    "DATABASE_URL": "postgresql://u@127.0.0.1/x",
    "RABBITMQ_HOST": "127.0.0.1",
}
EMBEDDED = {"FETCHER_MODE": "embedded", "APP_ENC_KEY": KEY}
WORKER = {
    **MANAGER,
    "FETCHER_MODE": "worker",
    "STREAMING_ENABLED": "true",
    "RABBITMQ_JOB_EVENTS_EXCHANGE": "x",
    "STREAMING_CLOUDEVENTS_SOURCE": "//x",
    "OBJECT_STORAGE_ENDPOINT": "http://127.0.0.1:8333",
    "OBJECT_STORAGE_BUCKET": "b",
}
JWT = {"AUTH_MODE": "jwt", "AUTH_ISSUER": "https://issuer.test"}
INVALID = "invalid authentication settings: "


def _refusal(env: dict[str, str]) -> str:
    with pytest.raises(StartupRefused) as caught:
        Settings.from_env(env)
    return caught.value.reason


@pytest.mark.parametrize("base", [MANAGER, EMBEDDED], ids=["manager", "embedded"])
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"MULTI_TENANT_ENABLED": "true"}, "MULTI_TENANT_ENABLED=true requires AUTH_MODE=jwt"),
        (
            {"MULTI_TENANT_ENABLED": "true", "AUTH_MODE": "none"},
            "MULTI_TENANT_ENABLED=true requires AUTH_MODE=jwt",
        ),
        ({"AUTH_MODE": "oauth"}, "AUTH_MODE must be one of none, jwt"),
        ({"AUTH_MODE": "jwt "}, INVALID + "AUTH_ISSUER is required"),
        ({**JWT, "AUTH_ISSUER": "  "}, INVALID + "AUTH_ISSUER is required"),
        (JWT, INVALID + "set exactly one of AUTH_JWKS_URL and AUTH_JWT_SECRET"),
        (
            {**JWT, "AUTH_JWKS_URL": "https://idp.test/jwks", "AUTH_JWT_SECRET": SECRET},
            INVALID + "set exactly one of AUTH_JWKS_URL and AUTH_JWT_SECRET",
        ),
        ({**JWT, "AUTH_JWKS_URL": "http://idp.test/jwks"}, INVALID + "malformed AUTH_JWKS_URL"),
        ({**JWT, "AUTH_JWKS_URL": "http://10.0.0.1/j"}, INVALID + "malformed AUTH_JWKS_URL"),
        ({**JWT, "AUTH_JWKS_URL": "http://0.0.0.0/j"}, INVALID + "malformed AUTH_JWKS_URL"),
        (
            {**JWT, "AUTH_JWKS_URL": "http://127.0.0.1@evil.test/j"},
            INVALID + "malformed AUTH_JWKS_URL",
        ),
        ({**JWT, "AUTH_JWKS_URL": "ftp://idp.test/j"}, INVALID + "malformed AUTH_JWKS_URL"),
        ({**JWT, "AUTH_JWKS_URL": "https:///jwks"}, INVALID + "malformed AUTH_JWKS_URL"),
        ({**JWT, "AUTH_JWKS_URL": "file:jwks.json"}, INVALID + "malformed AUTH_JWKS_URL"),
        ({**JWT, "AUTH_JWKS_URL": "file://host/j.json"}, INVALID + "malformed AUTH_JWKS_URL"),
        ({**JWT, "AUTH_JWKS_URL": "/etc/jwks.json"}, INVALID + "malformed AUTH_JWKS_URL"),
        ({**JWT, "AUTH_JWKS_URL": "http://[::1/j"}, INVALID + "malformed AUTH_JWKS_URL"),
        (
            {**JWT, "AUTH_JWT_SECRET": base64.b64encode(bytes(31)).decode()},
            INVALID + "AUTH_JWT_SECRET must be standard base64 of at least 32 bytes",
        ),
        (
            {**JWT, "AUTH_JWT_SECRET": "not base64 at all!"},
            INVALID + "AUTH_JWT_SECRET must be standard base64 of at least 32 bytes",
        ),
        (
            {**JWT, "AUTH_JWT_SECRET": base64.urlsafe_b64encode(b"\xfb" * 33).decode()},
            INVALID + "AUTH_JWT_SECRET must be standard base64 of at least 32 bytes",
        ),
        (
            {**JWT, "AUTH_JWT_SECRET": SECRET.rstrip("=")},  # padding is required
            INVALID + "AUTH_JWT_SECRET must be standard base64 of at least 32 bytes",
        ),
        (
            {**JWT, "AUTH_JWT_SECRET": SECRET, "AUTH_LEEWAY_SECONDS": "301"},
            "invalid value for AUTH_LEEWAY_SECONDS",
        ),
        (
            {**JWT, "AUTH_JWT_SECRET": SECRET, "AUTH_LEEWAY_SECONDS": "-1"},
            "invalid value for AUTH_LEEWAY_SECONDS",
        ),
        (
            {**JWT, "AUTH_JWT_SECRET": SECRET, "AUTH_LEEWAY_SECONDS": "1.5"},
            "invalid value for AUTH_LEEWAY_SECONDS",
        ),
        (
            {**JWT, "AUTH_JWT_SECRET": SECRET, "AUTH_JWKS_REFRESH_SECONDS": "29"},
            "invalid value for AUTH_JWKS_REFRESH_SECONDS",
        ),
        (
            {**JWT, "AUTH_JWT_SECRET": SECRET, "AUTH_JWKS_REFRESH_SECONDS": "5m"},
            "invalid value for AUTH_JWKS_REFRESH_SECONDS",
        ),
    ],
)
def test_refusals(base: dict[str, str], change: dict[str, str], reason: str) -> None:
    refused = _refusal({**base, **change})
    assert refused == reason
    assert SECRET not in refused


def test_defaults_are_no_authentication() -> None:
    settings = Settings.from_env(MANAGER)
    assert settings.auth.mode is AuthMode.NONE
    assert not settings.auth.enabled
    assert not settings.multi_tenant


def test_none_ignores_the_other_variables() -> None:
    settings = Settings.from_env({**MANAGER, "AUTH_MODE": "none", "AUTH_JWKS_URL": "ftp://x"})
    assert not settings.auth.enabled
    assert settings.auth.jwks_url is None


def test_secret_settings() -> None:
    settings = Settings.from_env({**MANAGER, **JWT, "AUTH_JWT_SECRET": SECRET})
    auth = settings.auth
    assert auth.enabled
    assert auth.jwt_secret == SECRET_BYTES  # §12.2: the decoded bytes, not the text
    assert auth.jwks_url is None
    assert (auth.issuer, auth.audience, auth.leeway_seconds) == (
        "https://issuer.test",
        "fetcher",
        30,
    )
    assert (auth.jwks_refresh_seconds, auth.tenant_claim) == (300, "tenantId")
    assert SECRET in settings.secrets  # redacted from every log line (§9.2)
    assert SECRET not in repr(settings)
    assert SECRET_BYTES.hex() not in repr(settings)
    assert repr(SECRET_BYTES) not in repr(settings)


@pytest.mark.parametrize(
    "url",
    [
        "https://idp.test/.well-known/jwks.json",
        "HTTPS://idp.test/jwks",
        "http://127.0.0.1:8080/jwks.json",
        "http://127.1.2.3/jwks.json",
        "http://localhost:9000/jwks.json",
        "http://[::1]:9000/jwks.json",
        "file:///etc/fetcher/jwks.json",
    ],
)
def test_jwks_urls_accepted(url: str) -> None:
    env = {**MANAGER, **JWT, "AUTH_JWKS_URL": url}
    assert Settings.from_env(env).auth.jwks_url == url


def test_every_value_is_read() -> None:
    env = {
        **EMBEDDED,
        **JWT,
        "AUTH_JWKS_URL": "https://idp.test/jwks",
        "AUTH_AUDIENCE": "api://fetcher",
        "AUTH_JWKS_REFRESH_SECONDS": "30",
        "AUTH_LEEWAY_SECONDS": "0",
        "AUTH_TENANT_CLAIM": "org",
        "MULTI_TENANT_ENABLED": "true",
    }
    settings = Settings.from_env(env)
    auth = settings.auth
    assert settings.multi_tenant
    assert (auth.audience, auth.jwks_refresh_seconds, auth.leeway_seconds) == (
        "api://fetcher",
        30,
        0,
    )
    assert auth.tenant_claim == "org"
    assert auth.jwt_secret is None


def test_the_worker_ignores_auth_but_reads_multi_tenant() -> None:
    """§9.1: the Worker verifies no tokens (AUTH_* unread, even malformed); MULTI_TENANT is
    read by every mode (§12.5 per-tenant keys)."""
    env = {
        **WORKER,
        "AUTH_MODE": "bogus",
        "AUTH_JWKS_URL": "ftp://x",
        "MULTI_TENANT_ENABLED": "true",
    }
    settings = Settings.from_env(env)
    assert not settings.auth.enabled
    assert settings.multi_tenant
