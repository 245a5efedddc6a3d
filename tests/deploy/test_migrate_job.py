"""deploy/kubernetes/base/migrate-job.yaml: ``fetcher migrate`` as a Job before a rollout
(docs/upgrades.md). Its container runs as the image would run it: the entry point with the
Job's arguments and environment, the secret file at the path the Job mounts, against a real
PostgreSQL database."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fetcher.adapters.store._common import load_migrations
from tests.conftest import _fresh_database
from tests.deploy.layout import ENTRYPOINT, KUBERNETES_DIR, VENV_BIN, entrypoint_file_variables
from tests.integration.store.test_migrate_command import ledger, url_of

JOB = KUBERNETES_DIR / "migrate-job.yaml"


@pytest.fixture
def dsn() -> Iterator[str]:
    yield from _fresh_database("migrate_job")


def _job() -> dict[str, Any]:
    [doc] = [d for d in yaml.safe_load_all(JOB.read_text(encoding="utf-8")) if d]
    assert doc["kind"] == "Job"
    job: dict[str, Any] = doc
    return job


def _container() -> dict[str, Any]:
    [container] = _job()["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = container
    return found


def test_the_job_runs_migrate_with_the_release_image_and_only_the_database_secret() -> None:
    manager = yaml.safe_load_all((KUBERNETES_DIR / "manager.yaml").read_text(encoding="utf-8"))
    [deployment] = [d for d in manager if d and d["kind"] == "Deployment"]
    container = _container()
    assert container["args"] == ["migrate"]
    assert container["image"] == deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert [e["name"] for e in container["env"]] == ["DATABASE_URL_FILE"]
    assert entrypoint_file_variables()["DATABASE_URL_FILE"] == "DATABASE_URL"
    pod = _job()["spec"]["template"]["spec"]
    [volume] = pod["volumes"]
    assert volume["secret"]["items"] == [{"key": "database_url", "path": "database_url"}]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    hardened = container["securityContext"]
    assert hardened["readOnlyRootFilesystem"] is True
    assert hardened["allowPrivilegeEscalation"] is False
    assert hardened["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.integration
def test_the_job_container_migrates_a_fresh_database(dsn: str, tmp_path: Path) -> None:
    container = _container()
    [mount] = container["volumeMounts"]
    env = {item["name"]: item["value"] for item in container["env"]}
    secret = tmp_path / "database_url"
    secret.write_text(url_of(dsn) + "\n", encoding="utf-8")
    env["DATABASE_URL_FILE"] = env["DATABASE_URL_FILE"].replace(mount["mountPath"], str(tmp_path))
    done = subprocess.run(  # noqa: S603 - the image's entry point, the Job's arguments
        [str(ENTRYPOINT), *container["args"]],
        env={"PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith("migrations applied)")
    assert ledger(dsn) == [m.version for m in load_migrations("postgres")]
