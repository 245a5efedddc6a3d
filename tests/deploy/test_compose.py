"""compose.yaml: valid against the compose specification schema (vendored in deploy/schema/),
and every Fetcher service configured with variables the code reads, complete enough that
``Settings.from_env`` accepts it for the service's mode once its secret files exist."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from fetcher.settings import Mode, Settings
from tests.deploy.layout import (
    COMPOSE_FILE,
    COMPOSE_SCHEMA,
    ROOT,
    VENV_BIN,
    entrypoint_file_variables,
    settings_variables,
)

FETCHER_SERVICES = ("manager", "worker")


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _check_jsonschema(document: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [str(VENV_BIN / "check-jsonschema"), "--schemafile", str(COMPOSE_SCHEMA), str(document)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_compose_file_matches_the_compose_specification() -> None:
    result = _check_jsonschema(COMPOSE_FILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_rejects_a_broken_compose_file(tmp_path: Path) -> None:
    """The validator is not vacuous: an unknown start condition and a misspelt key fail."""
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    broken = text.replace("condition: service_healthy", "condition: service_up", 1)
    broken = broken.replace("stop_grace_period:", "stop_grace_periods:", 1)
    assert broken != text
    path = tmp_path / "compose.yaml"
    path.write_text(broken, encoding="utf-8")
    result = _check_jsonschema(path)
    assert result.returncode != 0
    assert "service_up" in result.stdout + result.stderr


@pytest.mark.parametrize("service", [*FETCHER_SERVICES, "s3-init"])
def test_every_variable_is_one_fetcher_reads(service: str) -> None:
    environment = _compose()["services"][service]["environment"]
    known = settings_variables() | entrypoint_file_variables().keys()
    unknown = sorted(set(environment) - known)
    assert not unknown, f"{service} sets variables Fetcher never reads: {unknown}"


def test_secrets_are_files_not_values() -> None:
    """No secret setting is given a value in compose.yaml, only its ``_FILE`` path."""
    for service in FETCHER_SERVICES:
        environment = _compose()["services"][service]["environment"]
        for name in entrypoint_file_variables().values():
            if name == "OBJECT_STORAGE_ACCESS_KEY_ID":
                continue  # an identifier, not a secret; compose.yaml names it in clear
            assert name not in environment, f"{service} sets {name} in clear"
        assert environment["APP_ENC_KEY_FILE"].startswith("/run/secrets/")


@pytest.mark.parametrize("service", FETCHER_SERVICES)
def test_settings_accept_each_service(service: str, tmp_path: Path) -> None:
    """The service's environment, its ``_FILE`` secrets read the way the entry point reads
    them from files made by scripts/compose-secrets.sh, passes every startup check."""
    secrets_dir = tmp_path / "secrets"
    subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [str(ROOT / "scripts" / "compose-secrets.sh"), str(secrets_dir)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    compose = _compose()
    sources = {name: spec["file"] for name, spec in compose["secrets"].items()}
    mounted = {f"/run/secrets/{name}": name for name in compose["services"][service]["secrets"]}
    env: dict[str, str] = {}
    for key, value in compose["services"][service]["environment"].items():
        name = entrypoint_file_variables().get(key)
        if name is None:
            env[key] = str(value)
            continue
        secret = mounted[value]  # a _FILE path must be one of the service's mounted secrets
        env[name] = (secrets_dir / Path(sources[secret]).name).read_text().rstrip("\n")
    settings = Settings.from_env(env)
    assert settings.mode is Mode(service)
    assert settings.database_url.startswith("postgresql://fetcher:")
    assert settings.rabbitmq is not None
    assert settings.rabbitmq.host == "rabbitmq"
    # Only the Worker stores results; the Manager is given no object storage at all.
    expected = "http://s3:8333" if service == "worker" else None
    assert settings.object_storage.endpoint == expected
    assert settings.auth.enabled is (service == "manager")


@pytest.mark.parametrize("service", [*FETCHER_SERVICES, "s3-init"])
def test_fetcher_containers_are_hardened(service: str) -> None:
    spec = _compose()["services"][service]
    assert spec["read_only"] is True
    assert spec["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in spec["security_opt"]
    assert spec["mem_limit"]
    assert spec["cpus"]


def test_every_service_has_a_memory_limit() -> None:
    for name, spec in _compose()["services"].items():
        assert spec.get("mem_limit"), name


def test_secure_defaults() -> None:
    """jwt and the SSRF guard; each secret only where it is read: the Manager stores no
    results and gets neither the S3 secret nor any object storage setting."""
    services = _compose()["services"]
    manager = services["manager"]
    assert manager["environment"]["AUTH_MODE"] == "jwt"
    assert "auth_jwt_secret" in manager["secrets"]
    for service in FETCHER_SERVICES:
        assert services[service]["environment"]["SSRF_GUARD_ENABLED"] == "true"
        mounted = {f"/run/secrets/{name}" for name in services[service]["secrets"]}
        read = {
            value
            for key, value in services[service]["environment"].items()
            if key in entrypoint_file_variables()
        }
        assert mounted == read, service
    assert not [k for k in manager["environment"] if k.startswith("OBJECT_STORAGE")]
    assert "s3_secret_key" not in manager["secrets"]
    assert services["s3-init"]["secrets"] == ["s3_init_secret_key"]


def test_one_least_privilege_s3_identity_per_component(tmp_path: Path) -> None:
    """s3.json from scripts/compose-secrets.sh: the Worker's identity may read, write and
    list the result bucket only; only the one-shot s3-init may administer it; no identity
    is a global Admin. Each service signs with its own identity's key."""
    subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [str(ROOT / "scripts" / "compose-secrets.sh"), str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    config = json.loads((tmp_path / "s3.json").read_text())
    identities = {i["credentials"][0]["accessKey"]: i for i in config["identities"]}
    services = _compose()["services"]
    bucket = services["worker"]["environment"]["OBJECT_STORAGE_BUCKET"]
    worker = identities[services["worker"]["environment"]["OBJECT_STORAGE_ACCESS_KEY_ID"]]
    assert sorted(worker["actions"]) == [f"{a}:{bucket}" for a in ("List", "Read", "Write")]
    init = identities[services["s3-init"]["environment"]["OBJECT_STORAGE_ACCESS_KEY_ID"]]
    assert f"Admin:{bucket}" in init["actions"]
    assert all(a != "Admin" for i in identities.values() for a in i["actions"])
    keys = {
        "s3_secret_key": worker["credentials"][0]["secretKey"],
        "s3_init_secret_key": init["credentials"][0]["secretKey"],
    }
    for name, key in keys.items():
        assert (tmp_path / name).read_text().strip() == key
