"""deploy/kubernetes/overlays/: each overlay rendered by ``kubectl kustomize`` (the same
script as ``make lint``, which validates the output strictly), and the production overlay
read as a cluster would receive it: secure by default (issue 36, docs/security.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.layout import KUBERNETES_ROOT, ROOT
from tests.deploy.test_kubernetes import _check_references
from tests.services import services_required

OVERLAYS = sorted(p.name for p in (KUBERNETES_ROOT / "overlays").iterdir() if p.is_dir())
COMPONENTS = ("manager", "worker")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    if shutil.which("kubectl") is None:
        reason = "kubectl not installed (scripts/system-packages.sh lint)"
        if services_required():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("rendered")
    done = subprocess.run(  # noqa: S603 - our own script, fixed argv
        [str(ROOT / "scripts" / "render-overlays.sh"), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # no warning other than the known deprecations
    return {
        name: [d for d in yaml.safe_load_all((out / f"{name}.yaml").read_text()) if d]
        for name in OVERLAYS
    }


def _find(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in documents if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} {name}"
    return found[0]


def _pod(documents: list[dict[str, Any]], component: str) -> dict[str, Any]:
    spec: dict[str, Any] = _find(documents, "Deployment", f"fetcher-{component}")["spec"]
    return spec


def _env(documents: list[dict[str, Any]], component: str) -> dict[str, str]:
    config = _find(documents, "ConfigMap", "fetcher-config")["data"]
    container = _pod(documents, component)["template"]["spec"]["containers"][0]
    own = {i["name"]: i["value"] for i in container["env"] if "value" in i}
    merged: dict[str, str] = config | own
    return merged


def test_there_are_a_dev_and_a_production_overlay() -> None:
    assert {"dev", "production"} <= set(OVERLAYS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_lands_in_the_overlay_namespace(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    documents = rendered[overlay]
    namespace = next(d for d in documents if d["kind"] == "Namespace")["metadata"]["name"]
    for document in documents:
        if document["kind"] != "Namespace":
            assert document["metadata"]["namespace"] == namespace, document["metadata"]
    for component in COMPONENTS:
        container = _pod(documents, component)["template"]["spec"]["containers"][0]
        _check_references(container)
        assert container["image"] != "fetcher", "the overlay sets no image"


@pytest.fixture(scope="module")
def production(rendered: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return rendered["production"]


def test_production_authenticates_and_guards_against_ssrf(
    production: list[dict[str, Any]],
) -> None:
    manager = _env(production, "manager")
    assert manager["AUTH_MODE"] == "jwt"
    assert manager["AUTH_ISSUER"].startswith("https://")
    assert manager["AUTH_JWKS_URL"].startswith("https://")
    assert manager["ENV_NAME"] == "production"
    for component in COMPONENTS:
        assert _env(production, component)["SSRF_GUARD_ENABLED"] == "true"
    assert "fetcher.example.com" in manager["ALLOWED_HOSTS"].split(",")


@pytest.mark.parametrize("component", COMPONENTS)
def test_production_pods_are_hardened(production: list[dict[str, Any]], component: str) -> None:
    pod = _pod(production, component)["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    limits = container["resources"]["limits"]
    assert {"cpu", "memory"} <= limits.keys()
    assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
    assert "@sha256:" in container["image"] or ":" in container["image"].rpartition("/")[2]


@pytest.mark.parametrize(("component", "port"), [("manager", 4006), ("worker", 4007)])
def test_production_network_policy_admits_only_the_component_port(
    production: list[dict[str, Any]], component: str, port: int
) -> None:
    policy = _find(production, "NetworkPolicy", f"fetcher-{component}")["spec"]
    labels = _pod(production, component)["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    ingress_ports = {p["port"] for rule in policy["ingress"] for p in rule["ports"]}
    assert ingress_ports == {port}
    for rule in policy["ingress"]:
        assert rule["from"], "an ingress rule without `from` admits every source"
    egress_ports = {p["port"] for rule in policy["egress"] for p in rule["ports"]}
    assert {53, 5432, 5672} <= egress_ports
    assert (8333 in egress_ports) is (component == "worker")  # only the Worker stores results


def test_production_datasource_egress_is_one_editable_list(
    production: list[dict[str, Any]],
) -> None:
    policy = _find(production, "NetworkPolicy", "fetcher-datasources")["spec"]
    assert policy["policyTypes"] == ["Egress"]
    for rule in policy["egress"]:
        assert rule["to"]
        assert rule["ports"]


def test_production_ingress_routes_to_the_manager_service(
    production: list[dict[str, Any]],
) -> None:
    ingress = _find(production, "Ingress", "fetcher-manager")["spec"]
    service = _find(production, "Service", "fetcher-manager")
    backends = [
        path["backend"]["service"]["name"]
        for rule in ingress["rules"]
        for path in rule["http"]["paths"]
    ]
    assert backends == [service["metadata"]["name"]]
    assert ingress["tls"]
    assert _find(production, "Deployment", "fetcher-manager")["spec"]["replicas"] >= 2


def test_the_kubernetes_files_stay_under_the_known_paths() -> None:
    """Nothing left at deploy/kubernetes/*.yaml: `kubectl apply -f deploy/kubernetes/` would
    apply an unrendered part; the base and the overlays are the only entry points."""
    assert not list(KUBERNETES_ROOT.glob("*.yaml"))
    assert (KUBERNETES_ROOT / "base" / "kustomization.yaml").is_file()
    assert Path(KUBERNETES_ROOT / "secret-template").is_dir()
