"""deploy/kubernetes/base/: the manifests (validated against the Kubernetes schemas by
``kubernetes-validate`` in ``make lint``) configure Fetcher the way its code reads settings,
probe the ports each mode serves, and give the Worker's drain the time it may need. The
rendered overlays are checked in test_kubernetes_overlays.py."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from fetcher.crypto import generate_master_key
from fetcher.engine.limits import Limits
from fetcher.settings import Mode, Settings
from tests.deploy.layout import (
    KUBERNETES_DIR,
    KUBERNETES_ROOT,
    ROOT,
    entrypoint_file_variables,
    settings_variables,
)

MODES = ("manager", "worker")


def _documents(name: str) -> list[dict[str, Any]]:
    text = (KUBERNETES_DIR / name).read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _one(kind: str, mode: str) -> dict[str, Any]:
    found = [doc for doc in _documents(f"{mode}.yaml") if doc["kind"] == kind]
    assert len(found) == 1, f"{mode}.yaml holds {len(found)} {kind}"
    return found[0]


def _container(mode: str) -> dict[str, Any]:
    pod = _one("Deployment", mode)["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    container: dict[str, Any] = pod["containers"][0]
    return container


def _config_data() -> dict[str, str]:
    data: dict[str, str] = _documents("configmap.yaml")[0]["data"]
    return data


#: What the kubelet gives the downward-API helpers of a sample pod.
_SAMPLE_POD = {"POD_IP": "10.42.0.7", "POD_NAMESPACE": "fetcher"}


def _environment(mode: str) -> dict[str, str]:
    """The ConfigMap, then the container's env (which wins), as the kubelet builds it: each
    ``$(NAME)`` of a downward-API helper expanded with a sample pod's value; the helpers
    themselves (``valueFrom``) are left out: they are not settings."""
    env = {item["name"]: item["value"] for item in _container(mode)["env"] if "value" in item}
    return _config_data() | {name: _expand(value) for name, value in env.items()}


def _expand(value: str) -> str:
    for helper, sample in _SAMPLE_POD.items():
        value = value.replace(f"$({helper})", sample)
    return value


def _helpers(container: dict[str, Any]) -> list[str]:
    return [item["name"] for item in container["env"] if "valueFrom" in item]


@pytest.mark.parametrize("mode", MODES)
def test_every_variable_is_one_fetcher_reads(mode: str) -> None:
    known = settings_variables() | entrypoint_file_variables().keys()
    unknown = sorted(set(_environment(mode)) - known)
    assert not unknown, f"{mode} sets variables Fetcher never reads: {unknown}"


def _check_references(container: dict[str, Any]) -> None:
    """Each ``$(NAME)`` in an env value names a downward-API helper defined earlier in the
    list (the kubelet expands only those); each helper is used and is no Fetcher setting."""
    defined: list[str] = []
    used: set[str] = set()
    for item in container["env"]:
        for name in re.findall(r"\$\(([A-Z_]+)\)", item.get("value", "")):
            assert name in defined, f"{item['name']} expands $({name}) before it is defined"
            used.add(name)
        defined.append(item["name"])
    helpers = _helpers(container)
    assert set(helpers) == used, f"unused helpers: {set(helpers) - used}"
    assert not set(helpers) & (settings_variables() | entrypoint_file_variables().keys())


#: The downward-API values each pod's ALLOWED_HOSTS expands (docs/deployment.md).
HELPERS = {"manager": ["POD_IP", "POD_NAMESPACE"], "worker": ["POD_IP"]}


@pytest.mark.parametrize("mode", MODES)
def test_downward_api_helpers_are_defined_before_use(mode: str) -> None:
    _check_references(_container(mode))
    assert _helpers(_container(mode)) == HELPERS[mode]


def _settings(mode: str) -> Settings:
    """Settings.from_env over the pod's environment, each ``_FILE`` read from the mounted
    Secret (the template's values, with a real master key)."""
    secret = yaml.safe_load((KUBERNETES_ROOT / "secret-template/fetcher-secrets.yaml").read_text())
    values = secret["stringData"] | {"app_enc_key": generate_master_key()}
    pod = _one("Deployment", mode)["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if "secret" in v)
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    mount = next(m for m in _container(mode)["volumeMounts"] if m["name"] == volume["name"])
    env: dict[str, str] = {}
    for key, value in _environment(mode).items():
        name = entrypoint_file_variables().get(key)
        if name is None:
            env[key] = value
            continue
        directory, _, secret_key = value.rpartition("/")
        assert directory == mount["mountPath"], f"{key} is not under the secret mount"
        env[name] = values[secret_key]
    return Settings.from_env(env)


@pytest.mark.parametrize("mode", MODES)
def test_each_pod_mounts_only_the_secrets_it_reads(mode: str) -> None:
    """The Secret volume projects exactly the keys the container's ``_FILE`` paths name: the
    Manager stores no results and never sees the S3 secret key."""
    pod = _one("Deployment", mode)["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if "secret" in v)
    projected = {item["key"] for item in volume["secret"]["items"]}
    read = {
        value.rpartition("/")[2]
        for key, value in _environment(mode).items()
        if key in entrypoint_file_variables()
    }
    assert projected == read
    assert ("s3_secret_key" in projected) is (mode == "worker")


@pytest.mark.parametrize("mode", MODES)
def test_settings_accept_each_deployment(mode: str) -> None:
    assert _settings(mode).mode is Mode(mode)


@pytest.mark.parametrize("mode", MODES)
def test_probes_target_the_port_the_mode_serves(mode: str) -> None:
    settings = _settings(mode)
    container = _container(mode)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    expected = settings.health_port if mode == "worker" else settings.server_port
    for probe, path in (
        ("startupProbe", "/health"),
        ("livenessProbe", "/health"),
        ("readinessProbe", "/readyz"),
    ):
        get = container[probe]["httpGet"]
        assert (get["path"], ports[get["port"]]) == (path, expected), probe


def test_grace_periods_cover_the_drain() -> None:
    worker = _settings("worker")
    worker_grace = _one("Deployment", "worker")["spec"]["template"]["spec"]
    longest_job = Limits().timeout_seconds + worker.storage_timeout
    assert worker_grace["terminationGracePeriodSeconds"] >= longest_job
    manager = _settings("manager")
    manager_grace = _one("Deployment", "manager")["spec"]["template"]["spec"]
    assert manager_grace["terminationGracePeriodSeconds"] > manager.readyz_drain_delay


@pytest.mark.parametrize("mode", MODES)
def test_runs_as_the_image_user_with_a_writable_spool(mode: str) -> None:
    containerfile = (ROOT / "Containerfile").read_text()
    assert "\nUSER 10001:10001\n" in containerfile
    pod = _one("Deployment", mode)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert _container(mode)["securityContext"]["readOnlyRootFilesystem"] is True
    spool = next(m for m in _container(mode)["volumeMounts"] if m["name"] == "spool")
    assert spool["mountPath"] == "/var/lib/fetcher"  # the image's TMPDIR and volume


@pytest.mark.parametrize("mode", MODES)
def test_disruption_budget_and_selectors_match(mode: str) -> None:
    labels = _one("Deployment", mode)["spec"]["template"]["metadata"]["labels"]
    selector = _one("PodDisruptionBudget", mode)["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()


def test_the_autoscaler_scales_the_worker() -> None:
    hpa = _one("HorizontalPodAutoscaler", "worker")["spec"]
    assert hpa["scaleTargetRef"]["name"] == _one("Deployment", "worker")["metadata"]["name"]
    service = _one("Service", "manager")["spec"]
    assert service["selector"].items() <= (
        _one("Deployment", "manager")["spec"]["template"]["metadata"]["labels"].items()
    )
