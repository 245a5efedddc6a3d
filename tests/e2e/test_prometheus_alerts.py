"""§15.2 through running processes: the ``/metrics`` of a Manager, a Worker and an embedded
process list exactly the families of docs/metrics.md (both directions), a finished job shows
up under its bounded labels, and a real Prometheus (Debian's ``prometheus``, on loopback, its
storage in a temp dir, stopped by PID) scraping a Manager and a Worker fires the shipped
``FetcherNoWorkerConsuming`` expression once the Worker is stopped."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from fetcher import __version__
from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    PRODUCT,
    FetcherProcess,
    Stack,
    embedded_fetcher,
    eventually,
    free_port,
)
from tests.metrics_catalogue import ALERTS, catalogue, exposed

pytestmark = E2E

FAST = {SOURCE_CONFIG: {"public.accounts": ["id"]}}
#: Prometheus's own scrape and evaluation period in this test.
PERIOD = "1s"


async def _exposition(http: httpx.AsyncClient, process: FetcherProcess) -> str:
    response = await http.get(f"{process.base_url}/metrics")
    assert response.status_code == 200, response.text
    return response.text


def _assert_catalogued(text: str, mode: str) -> None:
    """Exactly the catalogue's families, with its types, and no label it does not list."""
    documented = catalogue()
    families = exposed(text)
    assert families.keys() - documented.keys() == set(), f"{mode}: exposed, not catalogued"
    assert documented.keys() - families.keys() == set(), f"{mode}: catalogued, not exposed"
    for name, family in families.items():
        assert family.type == documented[name].type, (mode, name)
        assert family.labels <= documented[name].labels, (mode, name, family.labels)


async def test_every_mode_exposes_exactly_the_catalogue(stack: Stack, tmp_path: Path) -> None:
    """Manager, Worker (after running one job) and embedded mode against docs/metrics.md; the
    job is counted under its product, engine and category, with its wait and run times."""
    http = stack.launcher.http
    async with stack.launcher.running_worker() as worker:
        job_id = await stack.api.submit(FAST)
        job = await stack.api.wait_terminal(job_id)
        assert job["status"] == "completed"
        assert job["traceId"] is None  # §15.3: the session's Manager does not trace
        worker_text = await _exposition(http, worker)
        samples = await worker.metrics(http)
    _assert_catalogued(await _exposition(http, stack.manager), "manager")
    _assert_catalogued(worker_text, "worker")
    outcome = (
        'fetcher_job_outcomes_total{category="none",engine="postgresql",'
        f'product="{PRODUCT}",status="completed"}}'
    )
    assert samples[outcome] >= 1
    assert samples["fetcher_job_wait_seconds_count"] >= 1
    assert samples['fetcher_job_run_seconds_count{engine="postgresql"}'] >= 1
    assert samples["fetcher_worker_jobs_in_flight"] == 0
    assert [k for k in samples if k.startswith("fetcher_build_info{")] == [
        f'fetcher_build_info{{mode="worker",version="{__version__}"}}'
    ]
    assert samples["process_open_fds"] > 0
    async with embedded_fetcher(tmp_path) as embedded:
        _assert_catalogued(await _exposition(http, embedded), "embedded")


def _test_rules(directory: Path) -> Path:
    """The shipped rules with every ``for:`` shortened to one period; expressions untouched."""
    document = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    for group in document["groups"]:
        for rule in group["rules"]:
            rule["for"] = PERIOD
    path = directory / "alerts.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@contextlib.contextmanager
def _prometheus(directory: Path, targets: dict[str, str]) -> Iterator[str]:
    """A Prometheus on a free loopback port scraping ``targets`` (job → host:port) every
    second with the test rules; its base URL. Stopped by PID, its storage in ``directory``."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: run scripts/system-packages.sh"
    config: dict[str, Any] = {
        "global": {"scrape_interval": PERIOD, "evaluation_interval": PERIOD},
        "rule_files": [str(_test_rules(directory))],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [target]}]}
            for job, target in targets.items()
        ],
    }
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    log = (directory / "prometheus.log").open("wb")
    process = subprocess.Popen(  # noqa: S603 (the packaged binary, fixed arguments)
        [
            binary,
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()


async def _alerts(http: httpx.AsyncClient, base: str) -> dict[str, str]:
    """Alert name → state (``pending``/``firing``) from ``/api/v1/alerts``."""
    response = await http.get(f"{base}/api/v1/alerts")
    assert response.status_code == 200, response.text
    return {a["labels"]["alertname"]: a["state"] for a in response.json()["data"]["alerts"]}


async def test_a_real_prometheus_fires_no_worker_when_the_worker_stops(
    stack: Stack, tmp_path: Path
) -> None:
    http = stack.launcher.http
    worker = await stack.launcher.worker()
    targets = {
        "fetcher-manager": stack.manager.base_url.removeprefix("http://"),
        "fetcher-worker": worker.base_url.removeprefix("http://"),
    }
    with _prometheus(tmp_path, targets) as base:

        async def both_up() -> bool | None:
            with contextlib.suppress(httpx.TransportError):
                response = await http.get(f"{base}/api/v1/targets")
                active = response.json()["data"]["activeTargets"]
                if len(active) == 2 and all(t["health"] == "up" for t in active):
                    return True
            return None

        await eventually(both_up, "Prometheus scraping the Manager and the Worker", within=30)

        async def worker_seen() -> bool | None:
            query = 'fetcher_build_info{mode="worker"}'
            response = await http.get(f"{base}/api/v1/query", params={"query": query})
            return True if response.json()["data"]["result"] else None

        await eventually(worker_seen, "the Worker's build info in Prometheus", within=30)
        # Several evaluations with the Worker up: the rule stays quiet.
        await eventually(_evaluated(http, base), "three rule evaluations", within=30)
        assert "FetcherNoWorkerConsuming" not in await _alerts(http, base)

        assert await worker.terminate() == 0

        async def firing() -> bool | None:
            alerts = await _alerts(http, base)
            return True if alerts.get("FetcherNoWorkerConsuming") == "firing" else None

        await eventually(firing, "FetcherNoWorkerConsuming firing", within=60)
        alerts = await _alerts(http, base)
        assert alerts.get("FetcherReadinessDown") is None, alerts


def _evaluated(http: httpx.AsyncClient, base: str) -> Any:
    """A probe true once the rule group has been evaluated at least three times."""
    seen: set[str] = set()

    async def probe() -> bool | None:
        response = await http.get(f"{base}/api/v1/rules")
        group = response.json()["data"]["groups"][0]
        seen.add(group["lastEvaluation"])
        return True if len(seen) >= 3 else None

    return probe
