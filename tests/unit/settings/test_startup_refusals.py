"""§9.3: each refusal's exact reason, and `fetcher run` printing it before any port opens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fetcher.settings import Mode, Settings, StartupRefused

KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
PG = "postgresql://reader:s3cr3t-pw@127.0.0.1:5432/fetcher"
WORKER = {
    "FETCHER_MODE": "worker",
    "APP_ENC_KEY": KEY,
    "DATABASE_URL": PG,
    "RABBITMQ_HOST": "127.0.0.1",
    "STREAMING_ENABLED": "true",
    "RABBITMQ_JOB_EVENTS_EXCHANGE": "fetcher.job.events",
    "STREAMING_CLOUDEVENTS_SOURCE": "//lerian.fetcher/worker",
    "OBJECT_STORAGE_ENDPOINT": "http://127.0.0.1:8333",
    "OBJECT_STORAGE_BUCKET": "results",
}


def _refusal(env: dict[str, str]) -> str:
    with pytest.raises(StartupRefused) as caught:
        Settings.from_env(env)
    return caught.value.reason


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"FETCHER_MODE": ""}, "FETCHER_MODE must be one of manager, worker, embedded"),
        ({"FETCHER_MODE": "both"}, "FETCHER_MODE must be one of manager, worker, embedded"),
        ({"APP_ENC_KEY": ""}, "APP_ENC_KEY is required"),
        ({"APP_ENC_KEY": "%%%"}, "invalid master key (base64)"),
        ({"APP_ENC_KEY": "c2hvcnQ="}, "master key too short: got 5 bytes, minimum 32 required"),
        ({"MULTI_TENANT_ENABLED": "yes"}, "invalid value for MULTI_TENANT_ENABLED"),
        ({"DATABASE_URL": ""}, "DATABASE_URL must be a postgresql:// URL"),
        ({"DATABASE_URL": "sqlite:///x.db"}, "DATABASE_URL must be a postgresql:// URL"),
        ({"DATABASE_URL": "mysql://x/y"}, "unsupported DATABASE_URL scheme"),
        ({"STREAMING_ENABLED": "false"}, "STREAMING_ENABLED must be true"),
        ({"RABBITMQ_JOB_EVENTS_EXCHANGE": " "}, "RABBITMQ_JOB_EVENTS_EXCHANGE is required"),
        ({"STREAMING_CLOUDEVENTS_SOURCE": ""}, "STREAMING_CLOUDEVENTS_SOURCE is required"),
        ({"RABBITMQ_HOST": ""}, "RABBITMQ_HOST is required"),
        ({"OBJECT_STORAGE_BUCKET": ""}, "object storage is not configured"),
        ({"OBJECT_STORAGE_ENDPOINT": ""}, "object storage is not configured"),
        ({"PENDING_TIMEOUT_SECONDS": "299"}, "invalid value for PENDING_TIMEOUT_SECONDS"),
        ({"STORAGE_TIMEOUT_SECONDS": "x"}, "invalid value for STORAGE_TIMEOUT_SECONDS"),
        ({"SSRF_GUARD_ENABLED": "1"}, "invalid value for SSRF_GUARD_ENABLED"),
        ({"ENCODER_PROCESS_ENABLED": "on"}, "invalid value for ENCODER_PROCESS_ENABLED"),
    ],
)
def test_worker_refusals(change: dict[str, str], reason: str) -> None:
    assert _refusal({**WORKER, **change}) == reason


def test_a_multi_tenant_worker_needs_no_auth_mode() -> None:
    """§9.3: the Worker verifies no tokens and starts; only the Manager/embedded refuse."""
    settings = Settings.from_env({**WORKER, "MULTI_TENANT_ENABLED": "true"})
    assert settings.multi_tenant
    manager = {**WORKER, "FETCHER_MODE": "manager", "MULTI_TENANT_ENABLED": "true"}
    assert _refusal(manager) == "MULTI_TENANT_ENABLED=true requires AUTH_MODE=jwt"


def test_a_complete_worker_configuration_is_accepted_and_hides_secrets() -> None:
    settings = Settings.from_env(WORKER)
    assert settings.mode is Mode.WORKER
    assert "s3cr3t-pw" not in repr(settings)
    assert KEY not in repr(settings)
    assert "s3cr3t-pw" in settings.secrets


def test_embedded_defaults_need_no_servers() -> None:
    settings = Settings.from_env({"FETCHER_MODE": "embedded", "APP_ENC_KEY": KEY})
    assert settings.rabbitmq is None
    assert settings.object_storage.endpoint is None
    assert settings.sqlite_path is not None
    assert settings.sqlite_path.endswith("fetcher-data/fetcher.db")


def test_embedded_with_a_broker_needs_the_event_settings() -> None:
    env = {"FETCHER_MODE": "embedded", "APP_ENC_KEY": KEY, "RABBITMQ_HOST": "127.0.0.1"}
    assert _refusal(env) == "RABBITMQ_JOB_EVENTS_EXCHANGE is required"


def test_engine_max_result_bytes() -> None:
    embedded = {"FETCHER_MODE": "embedded", "APP_ENC_KEY": KEY}
    assert (
        Settings.from_env({**embedded, "ENGINE_MAX_RESULT_BYTES": "0"}).engine_max_result_bytes
        is None
    )
    assert (
        Settings.from_env({**embedded, "ENGINE_MAX_RESULT_BYTES": "10"}).engine_max_result_bytes
        == 10
    )
    assert _refusal({**embedded, "ENGINE_MAX_RESULT_BYTES": "ten"}) == (
        "invalid value for ENGINE_MAX_RESULT_BYTES"
    )


def test_fetcher_run_prints_one_refusal_line_and_exits_1() -> None:
    fetcher = str(Path(sys.executable).with_name("fetcher"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FETCHER_", "APP_ENC"))}
    done = subprocess.run(  # noqa: S603 - our own console script
        [fetcher, "run"],
        env={**env, "FETCHER_MODE": "manager", "APP_ENC_KEY": KEY},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr == "startup refused: DATABASE_URL must be a postgresql:// URL\n"


@pytest.mark.parametrize("mode", ["manager", "embedded"])
def test_http_max_connections(mode: str) -> None:
    """§9.1: requests in flight at once, default 1000; §9.3: a malformed or out-of-range
    integer refuses startup (a limit of 0 would refuse every request)."""
    env = {**WORKER, "FETCHER_MODE": mode}
    if mode == "embedded":
        env = {"FETCHER_MODE": "embedded", "APP_ENC_KEY": KEY}
    assert Settings.from_env(env).http_max_connections == 1000
    assert Settings.from_env({**env, "HTTP_MAX_CONNECTIONS": " 7 "}).http_max_connections == 7
    for bad in ("0", "-1", "1.5", "1e3", "ten", "+5"):
        assert _refusal({**env, "HTTP_MAX_CONNECTIONS": bad}) == (
            "invalid value for HTTP_MAX_CONNECTIONS"
        )


def test_the_worker_does_not_read_http_max_connections() -> None:
    """§9.1: the variable is marked M and E only, so a Worker never refuses over it."""
    assert Settings.from_env({**WORKER, "HTTP_MAX_CONNECTIONS": "0"}).mode is Mode.WORKER


@pytest.mark.parametrize(
    ("mode", "value", "expected"),
    [
        ("worker", "", False),
        ("embedded", "", True),
        ("worker", "true", True),
        ("embedded", "false", False),
        ("embedded", " TRUE ", True),
    ],
)
def test_the_encoder_process_is_on_by_default_only_in_embedded_mode(
    mode: str, value: str, expected: bool
) -> None:
    env = WORKER if mode == "worker" else {"FETCHER_MODE": "embedded", "APP_ENC_KEY": KEY}
    settings = Settings.from_env({**env, "ENCODER_PROCESS_ENABLED": value})
    assert settings.encoder_process is expected


#: §15.1's exact reason.
OPEN_API = (
    "AUTH_MODE=none on a non-loopback address with ENV_NAME=production "
    "requires AUTH_NONE_ACKNOWLEDGED=true"
)
MANAGER = {**WORKER, "FETCHER_MODE": "manager", "ENV_NAME": "production"}
JWT = {"AUTH_MODE": "jwt", "AUTH_ISSUER": "https://issuer.test/", "AUTH_JWT_SECRET": KEY}


@pytest.mark.parametrize("mode", ["manager", "embedded"])
@pytest.mark.parametrize("address", [":4006", "0.0.0.0:4006", "10.1.2.3:4006", "[::]:4006"])
def test_an_open_api_in_production_is_refused(mode: str, address: str) -> None:
    """§15.1: no authentication, a listener beyond loopback and ENV_NAME=production."""
    env = {**MANAGER, "FETCHER_MODE": mode, "SERVER_ADDRESS": address}
    assert _refusal(env) == OPEN_API
    assert _refusal({**env, "ENV_NAME": " Production "}) == OPEN_API
    assert _refusal({**env, "AUTH_NONE_ACKNOWLEDGED": "false"}) == OPEN_API
    assert _refusal({**env, "AUTH_NONE_ACKNOWLEDGED": "yes"}) == (
        "invalid value for AUTH_NONE_ACKNOWLEDGED"
    )


@pytest.mark.parametrize(
    "change",
    [
        {"AUTH_NONE_ACKNOWLEDGED": "true"},  # the operator's explicit acknowledgement
        JWT,  # authentication on
        {"SERVER_ADDRESS": "127.0.0.1:4006"},  # loopback only
        {"SERVER_ADDRESS": "[::1]:4006"},
        {"SERVER_ADDRESS": "LocalHost:4006"},
        {"ENV_NAME": "staging"},  # §12.1's warn line alone
        {"ENV_NAME": ""},
    ],
)
def test_an_open_api_starts_when_one_condition_is_missing(change: dict[str, str]) -> None:
    assert Settings.from_env({**MANAGER, **change}).mode is Mode.MANAGER


def test_the_worker_is_never_refused_over_the_open_api_rule() -> None:
    """The Worker serves no API; it neither reads AUTH_NONE_ACKNOWLEDGED nor refuses."""
    env = {**WORKER, "ENV_NAME": "production", "AUTH_NONE_ACKNOWLEDGED": "maybe"}
    assert Settings.from_env(env).mode is Mode.WORKER
