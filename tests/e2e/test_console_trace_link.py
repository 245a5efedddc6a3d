"""§15.3 through a running process: an embedded ``fetcher run`` with tracing on (exporting to
an OTLP receiver on loopback) and ``TRACE_URL_TEMPLATE`` records the trace of the request that
created a job, serves it as ``traceId`` and the console's job page links it with the template;
a request whose caller did not sample its trace gives a job with ``traceId: null``, shown as
"not traced". Opened in headless Chromium (tests/e2e/browser.py)."""

from __future__ import annotations

from pathlib import Path

import httpx

from fetcher.cli.demo_data import build_sample_database
from tests.e2e.browser import web_driver
from tests.e2e.conftest import E2E
from tests.e2e.harness import PRODUCT, embedded_fetcher, unique
from tests.otlp_receiver import OtlpReceiver

pytestmark = E2E

TEMPLATE = "https://tempo.example/explore?trace={traceId}&orgId=1"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SAMPLED = f"00-{TRACE}-00f067aa0ba902b7-01"
UNSAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


async def _submit(http: httpx.AsyncClient, base: str, name: str, traceparent: str) -> str:
    body = {
        "dataRequest": {"mappedFields": {name: {"ledger": ["id"]}}},
        "metadata": {"source": PRODUCT, "correlationId": unique("trace-link")},
    }
    response = await http.post(
        f"{base}/v1/fetcher", json=body, headers={"traceparent": traceparent}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["jobId"])


async def test_the_job_page_links_the_jobs_trace(tmp_path: Path) -> None:
    samples = tmp_path / "samples"
    samples.mkdir()
    build_sample_database(samples / "ledger.db")
    receiver = OtlpReceiver()
    env = {
        "SQLITE_ALLOWED_DIR": str(samples),
        "TRACING_ENABLED": "true",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "TRACE_URL_TEMPLATE": TEMPLATE,
    }
    try:
        async with (
            embedded_fetcher(tmp_path, **env) as process,
            httpx.AsyncClient(timeout=30.0) as http,
        ):
            base = process.base_url
            name = unique("ledger").replace("-", "_")
            created = await http.post(
                f"{base}/v1/management/connections",
                json={
                    "configName": name,
                    "type": "SQLITE",
                    "databaseName": str(samples / "ledger.db"),
                },
                headers={"X-Product-Name": PRODUCT},
            )
            assert created.status_code == 201, created.text
            traced = await _submit(http, base, name, SAMPLED)
            untraced = await _submit(http, base, name, UNSAMPLED)
            for job_id, expected in ((traced, TRACE), (untraced, None)):
                job = (await http.get(f"{base}/v1/fetcher/{job_id}")).json()
                assert "traceId" in job
                assert job["traceId"] == expected
            config = (await http.get(f"{base}/console/config.json")).json()
            assert config["traceUrlTemplate"] == TEMPLATE
            async with web_driver(tmp_path / "profile") as driver:
                await driver.open(f"{base}/console#/jobs/{traced}")
                await driver.wait_for("a#trace-id", text=TRACE)
                link = await driver.script(
                    "const a = document.querySelector('a#trace-id');"
                    "return [a.getAttribute('href'), a.target, a.rel, a.textContent];"
                )
                assert link == [
                    TEMPLATE.replace("{traceId}", TRACE),
                    "_blank",
                    "noopener noreferrer",
                    TRACE,
                ]
                await driver.open(f"{base}/console#/jobs/{untraced}")
                await driver.wait_for("span#trace-id", text="not traced")
                assert (
                    await driver.script("return document.querySelectorAll('a#trace-id').length")
                    == 0
                )
    finally:
        receiver.close()
