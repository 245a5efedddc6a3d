"""Issue 22: the Manager's access log (one JSON line per request, probes at debug,
``ACCESS_LOG=false`` off) and its HTTP server span (W3C ``traceparent`` honoured)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from tests.fakes.jwks_harness import SECRET, auth_app, secret_env
from tests.fakes.jwks_server import claims
from tests.json_lines import JsonLines, json_lines
from tests.spans import recording
from tests.unit.manager.conftest import Harness, HarnessFactory

C = "/v1/management/connections"
PARENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{PARENT_TRACE}-b7ad6b7169203331-01"


@pytest.fixture
def access() -> Iterator[JsonLines]:
    with json_lines("fetcher.access") as collected:
        yield collected


async def test_one_info_line_per_request_with_the_route_template(
    h: Harness, access: JsonLines
) -> None:
    created = await h.create_ok()
    response = await h.client.get(f"{C}/{created['id']}")
    assert response.status_code == 200
    line = access.lines[-1]
    assert line["level"] == "info"
    assert line["event"] == "http request"
    assert (line["method"], line["route"], line["path"], line["status"]) == (
        "GET",
        "/v1/management/connections/{id}",
        f"{C}/{created['id']}",
        200,
    )
    assert isinstance(line["duration_ms"], float)
    assert line["request_id"] == response.headers["x-request-id"]
    assert "trace_id" not in line  # tracing is off
    assert len(access.lines) == 2  # the create and the read, one line each


async def test_unmatched_routes_and_errors_are_logged(h: Harness, access: JsonLines) -> None:
    response = await h.client.get("/v1/nowhere")
    assert response.status_code == 404
    [line] = access.lines
    assert (line["route"], line["status"], line["path"]) == ("unmatched", 404, "/v1/nowhere")


@pytest.mark.parametrize("path", ["/health", "/readyz", "/metrics"])
async def test_probes_and_the_scrape_are_debug(h: Harness, access: JsonLines, path: str) -> None:
    await h.client.get(path)
    [line] = access.lines
    assert (line["level"], line["path"]) == ("debug", path)


async def test_access_log_false_writes_no_line(
    make_harness: HarnessFactory, access: JsonLines
) -> None:
    h = await make_harness(env={"ACCESS_LOG": "false"})
    await h.create_ok()
    await h.client.get(C)
    assert access.lines == []


async def test_the_line_names_sub_and_tenant_when_authenticated(
    tmp_path: Path, access: JsonLines
) -> None:
    token = jwt.encode(claims(sub="carol"), SECRET, algorithm="HS256")
    async with auth_app(tmp_path, secret_env()) as app:
        response = await app.client.get(C, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200
        anonymous = await app.client.get(C)
        assert anonymous.status_code == 401
    authenticated, refused = access.lines[-2:]
    assert authenticated["sub"] == "carol"
    assert (refused["status"], "sub" in refused) == (401, False)


async def test_the_server_span_continues_an_incoming_traceparent(
    h: Harness, access: JsonLines
) -> None:
    with recording() as recorded:
        created = await h.create_ok()
        response = await h.client.get(f"{C}/{created['id']}", headers={"traceparent": TRACEPARENT})
        missing = await h.client.get("/v1/nowhere")
    assert (response.status_code, missing.status_code) == (200, 404)
    # FastAPI's own spans (which record exception messages) stay off: one server span each.
    assert [s.kind for s in recorded.spans()] == [SpanKind.SERVER] * 3
    spans = {s.name: s for s in recorded.spans()}
    read = spans["GET /v1/management/connections/{id}"]
    assert format(read.context.trace_id, "032x") == PARENT_TRACE
    assert read.parent is not None
    assert read.parent.is_remote
    assert read.attributes is not None
    assert read.attributes["http.route"] == "/v1/management/connections/{id}"
    assert read.attributes["http.response.status_code"] == 200
    assert read.attributes["http.request.method"] == "GET"
    assert read.status.status_code is StatusCode.UNSET
    create = spans["POST /v1/management/connections"]
    assert create.parent is None  # no traceparent: a new trace
    assert "GET unmatched" in spans
    line = access.lines[1]
    assert line["trace_id"] == PARENT_TRACE
    assert line["span_id"] == format(read.context.span_id, "016x")
