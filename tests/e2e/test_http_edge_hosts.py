"""Issue 33, items 1, 2, 3 and 6, through running ``fetcher run`` processes, from outside:

1. DNS rebinding: a ``Host`` that is not an IP literal, ``localhost`` or a name of
   ``ALLOWED_HOSTS`` → ``421 FET-0013`` before routing, on the Manager API (embedded) and on
   the Worker's health server; with ``AUTH_MODE=none``, a write sent from another site
   (``Sec-Fetch-Site``, ``Origin``) → ``403 FET-0014``, the body-less ``POST …/{id}/test``
   included, unless ``CORS_ALLOWED_ORIGINS`` admits the origin; off with ``AUTH_MODE=jwt``.
2. A page of jobs of ~0.9 MB ``metadata`` each stays small: each is cut to its source.
3. Well-formed but out-of-range dates on both list routes → ``400`` naming the parameter.
6. ``/docs`` framing headers, ``no-store`` and ``nosniff``, capped unknown names, canonical
   cursors only.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import E2E
from tests.e2e.harness import ProcessLauncher
from tests.e2e.test_http_edge_requests import JOB_BODY, JSON, Embedded, embedded_process
from tests.fakes.jwks_harness import secret_env

pytestmark = E2E

CONNECTIONS = "/v1/management/connections"
CREATE = {
    "configName": "cross_site",
    "type": "POSTGRESQL",
    "host": "db.example.com",
    "port": 5432,
    "databaseName": "ledger",
    "userName": "reader",
    "password": "pw-cross-site",
}
PRODUCT = {"X-Product-Name": "payments", **JSON}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    with embedded_process(tmp_path_factory.mktemp("hosts"), LOG_LEVEL="info") as running:
        yield running


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    """``ALLOWED_HOSTS`` with a name and a suffix, and one CORS origin."""
    with embedded_process(
        tmp_path_factory.mktemp("allowed"),
        ALLOWED_HOSTS="fetcher.internal, .svc.cluster.local",
        CORS_ALLOWED_ORIGINS="https://console.example",
    ) as running:
        yield running


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    with embedded_process(tmp_path_factory.mktemp("jwt"), **secret_env()) as running:
        yield running


def _client(server: Embedded) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.base_url, timeout=30)


def _assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    assert set(body) <= {"code", "title", "message", "fields"}, body
    assert response.headers["x-content-type-options"] == "nosniff"
    return body


# --- 1. Host allow-list -----------------------------------------------------------------------


async def test_a_rebound_name_is_refused_on_every_path_before_routing(server: Embedded) -> None:
    rebound = {"Host": f"rebind.example:{server.port}"}
    async with _client(server) as client:
        for path in ("/health", CONNECTIONS, "/v1/fetcher", "/console", "/docs", "/nope/"):
            body = _assert_error(await client.get(path, headers=rebound), 421, "FET-0013")
            assert body["title"] == "Misdirected Request"
            assert "rebind" not in body["message"]
        created = await client.post(CONNECTIONS, json=CREATE, headers={**PRODUCT, **rebound})
        _assert_error(created, 421, "FET-0013")
        listed = (await client.get(CONNECTIONS)).json()
        assert not [c for c in listed["items"] if c["configName"] == "cross_site"]
        for bad in ("a b", "[::1", f"localhost:{server.port}x", "host/evil"):
            _assert_error(await client.get("/health", headers={"Host": bad}), 421, "FET-0013")
    # The operator sees the refusals (LOG_LEVEL=info), which never reach the access log.
    assert "its Host is not in ALLOWED_HOSTS (421 FET-0013)" in server.log.read_text()


async def test_loopback_names_and_every_ip_literal_are_served(server: Embedded) -> None:
    """IP literals cannot be rebound: kubelet's probe (the pod IP) works with no setting."""
    port = server.port
    hosts = [
        f"127.0.0.1:{port}",
        f"LOCALHOST:{port}",
        "localhost.",
        f"console.localhost:{port}",
        f"[::1]:{port}",
        "10.42.7.19:4006",
        "[fd00::7]",
    ]
    async with _client(server) as client:
        for host in hosts:
            response = await client.get("/health", headers={"Host": host})
            assert response.status_code == 200, (host, response.text)
        # A request with no Host at all (HTTP/1.0: never a browser) is served.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /health HTTP/1.0\r\n\r\n")
        await writer.drain()
        answer = await reader.read()
        writer.close()
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


async def test_allowed_hosts_adds_names_and_suffixes(configured: Embedded) -> None:
    async with _client(configured) as client:
        for host in (
            "fetcher.internal",
            f"Fetcher.Internal:{configured.port}",
            "fetcher-manager.ops.svc.cluster.local:4006",
        ):
            assert (await client.get("/health", headers={"Host": host})).status_code == 200, host
        for host in ("other.internal", "svc.cluster.local.evil.example", "xfetcher.internal"):
            _assert_error(await client.get("/health", headers={"Host": host}), 421, "FET-0013")


async def test_the_worker_health_server_refuses_a_rebound_name(launcher: ProcessLauncher) -> None:
    worker = await launcher.worker()
    try:
        async with httpx.AsyncClient(base_url=worker.base_url, timeout=10) as client:
            refused = await client.get("/readyz", headers={"Host": "rebind.example"})
            _assert_error(refused, 421, "FET-0013")
            probe = await client.get("/health", headers={"Host": "10.42.7.19:4007"})
            assert probe.status_code == 200, probe.text
            assert probe.headers["cache-control"] == "no-store"
            assert probe.headers["x-content-type-options"] == "nosniff"
    finally:
        await worker.terminate()


# --- 1 and 6. Writes from another site with AUTH_MODE=none -----------------------------------


async def test_writes_from_another_site_are_refused(server: Embedded) -> None:
    probe = f"{CONNECTIONS}/{uuid.uuid4()}/test"
    own = f"http://127.0.0.1:{server.port}"
    foreign: list[dict[str, str]] = [
        {"Sec-Fetch-Site": "cross-site"},  # a no-cors fetch or form from another site
        {"Sec-Fetch-Site": "same-site"},  # another port of the same host is the same site
        {"Origin": "http://rebind.example:4006"},
        {"Origin": f"http://localhost:{server.port + 1}"},
        {"Origin": "null"},  # a sandboxed frame or a file:// page
    ]
    async with _client(server) as client:
        before = server.stored_jobs()
        for headers in foreign:
            body = _assert_error(await client.post(probe, headers=headers), 403, "FET-0014")
            assert body["title"] == "Cross-Site Request"
            _assert_error(await client.delete(probe[:-5], headers=headers), 403, "FET-0014")
            job = await client.post("/v1/fetcher", content=JOB_BODY, headers={**JSON, **headers})
            _assert_error(job, 403, "FET-0014")
        assert server.stored_jobs() == before
        # Reads are not refused (CORS keeps their answers from the other site), and the
        # process's own pages, curl and the SDK (no Origin, no Sec-Fetch-Site) still write.
        listed = await client.get(CONNECTIONS, headers={"Sec-Fetch-Site": "cross-site"})
        assert listed.status_code == 200
        for headers in ({}, {"Origin": own, "Sec-Fetch-Site": "same-origin"}, {"Origin": own}):
            _assert_error(await client.post(probe, headers=headers), 404, "FET-1001")


async def test_a_cors_origin_may_write_and_jwt_mode_does_not_check(
    configured: Embedded, guarded: Embedded
) -> None:
    probe = f"{CONNECTIONS}/{uuid.uuid4()}/test"
    allowed = {"Origin": "https://console.example", "Sec-Fetch-Site": "cross-site"}
    async with _client(configured) as client:
        response = await client.post(probe, headers=allowed)
        _assert_error(response, 404, "FET-1001")
        assert response.headers["access-control-allow-origin"] == "https://console.example"
        other = {"Origin": "https://other.example", "Sec-Fetch-Site": "cross-site"}
        _assert_error(await client.post(probe, headers=other), 403, "FET-0014")
    async with _client(guarded) as client:
        # A bearer token is never sent by a browser on its own: the token check answers.
        _assert_error(await client.post(probe, headers=allowed), 401, "FET-0010")


# --- 2. Bounded list pages --------------------------------------------------------------------


async def test_a_page_of_jobs_with_large_metadata_is_small(server: Embedded) -> None:
    request = json.loads(JOB_BODY)
    large = {f"k{n:03d}": "m" * 2000 for n in range(445)}  # ~0.9 MB, within the 1 MiB body
    ids = []
    async with _client(server) as client:
        for _ in range(3):
            body = {**request, "metadata": {"source": "payments", "run": _run(), **large}}
            created = await client.post("/v1/fetcher", json=body)
            assert created.status_code == 202, created.text
            ids.append(created.json()["jobId"])
        page = await client.get("/v1/fetcher", params={"limit": "100"})
        assert page.status_code == 200, page.text
        assert page.headers["cache-control"] == "no-store"
        assert len(page.content) < 64 * 1024, len(page.content)
        items = {item["id"]: item for item in page.json()["items"]}
        for job_id in ids:
            assert items[job_id]["truncated"] == ["metadata"]
            assert items[job_id]["metadata"]["source"] == "payments"
            assert set(items[job_id]["metadata"]) <= {"source", "error"}
        whole = (await client.get(f"/v1/fetcher/{ids[0]}")).json()
        assert whole["metadata"]["k444"] == "m" * 2000


async def test_a_page_of_connections_with_large_metadata_is_small(server: Embedded) -> None:
    large = {f"k{n:03d}": "m" * 2000 for n in range(445)}
    names = [f"big_{_run()}" for _ in range(3)]
    async with _client(server) as client:
        for name in names:
            body = {**CREATE, "configName": name, "metadata": large}
            created = await client.post(CONNECTIONS, json=body, headers=PRODUCT)
            assert created.status_code == 201, created.text
        page = await client.get(CONNECTIONS, params={"limit": "100"})
        assert page.status_code == 200, page.text
        assert len(page.content) < 64 * 1024, len(page.content)
        listed = {c["configName"]: c for c in page.json()["items"]}
        for name in names:
            assert listed[name]["truncated"] == ["metadata"]
            assert "metadata" not in listed[name]
        whole = (await client.get(f"{CONNECTIONS}/{listed[names[0]]['id']}")).json()
        assert whole["metadata"] == large
        assert "truncated" not in whole


# --- 3. Extreme but well-formed dates ---------------------------------------------------------

EXTREMES = ["9999-12-31", "0001-01-01T00:00:00+23:59", "9999-12-31T23:59:60Z"]


async def test_out_of_range_dates_are_400_naming_the_parameter(server: Embedded) -> None:
    async with _client(server) as client:
        for name in ("createdFrom", "createdTo"):
            for value in EXTREMES:
                response = await client.get("/v1/fetcher", params={name: value})
                body = _assert_error(response, 400, "FET-0408")
                assert list(body["fields"]) == [name], body
                assert body["message"].startswith(name)
        leap = await client.get("/v1/fetcher", params={"createdTo": "2016-12-31T23:59:60Z"})
        assert leap.status_code == 200, leap.text  # a real leap second: the next second
        for name in ("startDate", "endDate"):
            body = _assert_error(
                await client.get(CONNECTIONS, params={name: "9999-12-31"}), 400, "FET-0408"
            )
            assert body["message"].startswith(name)
        early = await client.get(CONNECTIONS, params={"startDate": "0001-01-01"})
        assert early.status_code == 200, early.text
        listed = await client.get("/v1/fetcher", params={"createdFrom": "0001-01-01"})
        assert listed.status_code == 200, listed.text
        assert listed.json()["items"]
    assert "OverflowError" not in server.log.read_text()
    assert "unhandled error" not in server.log.read_text()


# --- 6. Smaller edges -------------------------------------------------------------------------


async def test_docs_refuse_framing_and_answers_carry_the_edge_headers(server: Embedded) -> None:
    async with _client(server) as client:
        docs = await client.get("/docs")
        assert docs.status_code == 200
        assert "frame-ancestors 'none'" in docs.headers["content-security-policy"]
        assert docs.headers["x-frame-options"] == "DENY"
        for path in (CONNECTIONS, "/v1/fetcher", "/health", "/openapi.json"):
            answer = await client.get(path)
            assert answer.headers["cache-control"] == "no-store", path
            assert answer.headers["x-content-type-options"] == "nosniff", path
        missing = await client.get("/nope")
        _assert_error(missing, 404, "FET-0005")
        assert missing.headers["cache-control"] == "no-store"
        metrics = await client.get("/metrics")
        assert metrics.headers["x-content-type-options"] == "nosniff"


async def test_a_query_of_many_unknown_names_gets_a_small_answer(server: Embedded) -> None:
    """At most 10 unknown names, each cut to 100 characters, are echoed. (The server reads a
    request head of at most 16 KiB, h11's limit, so the query is just under it; before the
    cap its answer was about six times its size.)"""
    query = "&".join(f"{secrets.token_hex(6)}{'x' * 110}{n:03d}=1" for n in range(120))
    assert len(query) > 15_000
    async with _client(server) as client:
        response = await client.get(f"/v1/fetcher?{query}")
    body = _assert_error(response, 400, "FET-0405")
    assert len(body["fields"]) == 10
    assert all(len(name) <= 100 for name in body["fields"])
    assert len(response.content) < 4096, len(response.content)


def _run() -> str:
    return secrets.token_hex(6)


def _variants(part: str) -> list[str]:
    """Other last characters that decode to the same bytes (the padding bits differ)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

    def decode(text: str) -> bytes:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

    same = decode(part)
    return [part[:-1] + c for c in alphabet if c != part[-1] and decode(part[:-1] + c) == same]


async def test_only_the_canonical_form_of_a_cursor_is_accepted(server: Embedded) -> None:
    async with _client(server) as client:
        for _ in range(2):
            body = {**json.loads(JOB_BODY), "metadata": {"source": "payments", "run": _run()}}
            created = await client.post("/v1/fetcher", json=body)
            assert created.status_code == 202, created.text
        first = (await client.get("/v1/fetcher", params={"limit": "1"})).json()
        cursor = first["nextCursor"]
        ok = await client.get("/v1/fetcher", params={"limit": "1", "cursor": cursor})
        assert ok.status_code == 200, ok.text
        position, tag = cursor.split(".")
        forged = [f"{v}.{tag}" for v in _variants(position)]
        forged += [f"{position}.{v}" for v in _variants(tag)]
        assert len(forged) == 18  # 3 for a position of 50 bytes, 15 for a tag of 16
        for variant in forged:
            response = await client.get("/v1/fetcher", params={"limit": "1", "cursor": variant})
            body = _assert_error(response, 400, "FET-0405")
            assert list(body["fields"]) == ["cursor"]
