"""§2.1/§2.2 rules through HTTP: unknown routes, methods, body limit, media types, request
IDs, the 500 body, store outages and CORS."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fetcher.manager.errors import INTERNAL_ERROR_MESSAGE
from fetcher.services.store_roles import StoreUnavailableError
from tests.unit.manager.conftest import Harness, HarnessFactory, pg_body

CONNECTIONS = "/v1/management/connections"
MIB = 1024 * 1024
JSON = {"Content-Type": "application/json"}


def assert_error(
    response: object, status: int, code: str, title: str | None = None
) -> dict[str, Any]:
    import httpx

    assert isinstance(response, httpx.Response)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["code"] == code
    if title is not None:
        assert body["title"] == title
    assert isinstance(body["message"], str)
    assert set(body) <= {"code", "title", "message", "fields", "errors"}
    return dict(body)


async def test_unknown_route_is_fet_0005(h: Harness) -> None:
    assert_error(await h.client.get("/v1/nothing"), 404, "FET-0005", "Not Found")


@pytest.mark.parametrize("path", [f"{CONNECTIONS}/", "/v1/fetcher/", "/health/"])
async def test_trailing_slash_never_matches_nor_redirects(h: Harness, path: str) -> None:
    response = await h.client.get(path)
    assert_error(response, 404, "FET-0005")
    assert "location" not in response.headers


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", CONNECTIONS, "GET, POST"),
        ("DELETE", "/v1/fetcher", "GET, POST"),
        ("POST", f"{CONNECTIONS}/unassigned", "GET"),
        ("PATCH", f"{CONNECTIONS}/unassigned", "GET"),
        ("GET", f"{CONNECTIONS}/validate-schema", "POST"),
        ("DELETE", f"{CONNECTIONS}/validate-schema", "POST"),
        ("PUT", f"{CONNECTIONS}/{uuid.uuid4()}", "DELETE, GET, PATCH"),
        ("GET", f"{CONNECTIONS}/{uuid.uuid4()}/test", "POST"),
        ("OPTIONS", "/v1/fetcher", "GET, POST"),
        ("POST", "/health", "GET"),
    ],
)
async def test_wrong_method_is_405_with_allow(
    h: Harness, method: str, path: str, allow: str
) -> None:
    response = await h.client.request(method, path)
    assert_error(response, 405, "FET-0008", "Method Not Allowed")
    assert response.headers["allow"] == allow


async def test_body_over_1_mib_is_413(h: Harness) -> None:
    body = b'{"a":"' + b"x" * MIB + b'"}'
    response = await h.client.post("/v1/fetcher", content=body)
    assert_error(response, 413, "FET-0007", "Payload Too Large")
    assert h.publisher.published == []


async def test_chunked_body_over_1_mib_is_413_while_streaming(h: Harness) -> None:
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'{"a":"'
        for _ in range(40):
            sent += 64 * 1024
            yield b"x" * (64 * 1024)
        yield b'"}'

    response = await h.client.post(
        CONNECTIONS, content=chunks(), headers={"X-Product-Name": "payments"}
    )
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "FET-0007")


async def test_body_of_exactly_1_mib_is_read(h: Harness) -> None:
    body = b'{"a":"' + b"x" * (MIB - 8) + b'"}'
    assert len(body) == MIB
    response = await h.client.post("/v1/fetcher", content=body, headers=JSON)
    assert_error(response, 400, "FET-0400")


async def test_size_is_checked_before_the_media_type(h: Harness) -> None:
    response = await h.client.post(
        "/v1/fetcher", content=b"x" * (MIB + 1), headers={"Content-Type": "text/plain"}
    )
    assert_error(response, 413, "FET-0007")


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "multipart/form-data"])
async def test_other_media_types_are_415(h: Harness, content_type: str) -> None:
    response = await h.client.post(
        "/v1/fetcher", content=b"{}", headers={"Content-Type": content_type}
    )
    assert_error(response, 415, "FET-0009", "Unsupported Media Type")


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "APPLICATION/JSON; charset=utf-8", "application/problem+json"],
)
async def test_json_media_types_are_accepted(h: Harness, content_type: str) -> None:
    headers = {"Content-Type": content_type, "X-Product-Name": "payments"}
    response = await h.client.post(CONNECTIONS, content=b'{"x":1}', headers=headers)
    assert_error(response, 400, "FET-0400")


@pytest.mark.parametrize(
    "headers", [{}, {"Content-Type": ""}, {"Content-Type": " ; charset=utf-8"}]
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/fetcher"),
        ("POST", CONNECTIONS),
        ("POST", f"{CONNECTIONS}/validate-schema"),
        ("PATCH", f"{CONNECTIONS}/{uuid.uuid4()}"),
    ],
)
async def test_a_body_without_a_media_type_is_415(
    h: Harness, method: str, path: str, headers: dict[str, str]
) -> None:
    """§2.1/§13: a browser sends a Blob body with no ``Content-Type`` cross-site and without a
    preflight, so an absent (or blank) media type is refused before the body is parsed."""
    headers = {**headers, "X-Product-Name": "payments"}
    response = await h.client.request(method, path, content=b"{}", headers=headers)
    assert_error(response, 415, "FET-0009", "Unsupported Media Type")
    assert h.publisher.published == []


async def test_routes_that_ignore_their_body_never_check_it(h: Harness) -> None:
    connection = await h.create_ok()
    response = await h.client.post(
        f"{CONNECTIONS}/{connection['id']}/test",
        content=b"not json",
        headers={"Content-Type": "text/plain"},
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty request body"),
        (b"{", "unable to parse request body"),
        (b'{"a": NaN}', "unable to parse request body"),
        (b'{"a": 1e400}', "unable to parse request body"),
        (b'{"a": "\\u0000"}', "unable to parse request body"),
        (b'{"a": "\\ud800"}', "unable to parse request body"),
        (b'{"a": 12345678901234567890}', "unable to parse request body"),
        (b"[1]", "request body must be a JSON object"),
    ],
)
async def test_unparsable_bodies_are_fet_0001_invalid_payload(
    h: Harness, body: bytes, message: str
) -> None:
    response = await h.client.post("/v1/fetcher", content=body, headers=JSON)
    error = assert_error(response, 400, "FET-0001", "Invalid payload")
    assert error["message"] == message


async def test_request_id_is_reused_when_valid(h: Harness) -> None:
    response = await h.client.get("/health", headers={"X-Request-Id": "abc-123_XYZ"})
    assert response.headers["x-request-id"] == "abc-123_XYZ"


@pytest.mark.parametrize("value", [b"", b"has space", b"x" * 129, "caf\u00e9".encode()])
async def test_request_id_is_generated_otherwise(h: Harness, value: bytes) -> None:
    response = await h.client.get("/health", headers={b"X-Request-Id": value})
    generated = response.headers["x-request-id"]
    assert generated.encode() != value
    assert uuid.UUID(generated).version == 4


async def test_every_response_carries_a_request_id(h: Harness) -> None:
    for response in (
        await h.client.get("/nope"),
        await h.client.put(CONNECTIONS),
        await h.client.post("/v1/fetcher", content=b"x" * (MIB + 1)),
        await h.client.get(f"{CONNECTIONS}/nope"),
    ):
        assert response.headers["x-request-id"]


async def test_request_id_travels_to_the_work_message(h: Harness) -> None:
    await h.create_ok()
    body = {
        "dataRequest": {"mappedFields": {"pg_main": {"t": ["id"]}}},
        "metadata": {"source": "payments"},
    }
    response = await h.client.post("/v1/fetcher", json=body, headers={"X-Request-Id": "req-42"})
    assert response.status_code == 202
    assert h.publisher.published[0][1]["x-request-id"] == "req-42"


async def test_unhandled_exception_is_500_with_the_exact_message(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def boom(connection_id: str) -> dict[str, object]:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(h.runtime.connections.catalog, "describe", boom)
    response = await h.client.get(f"{CONNECTIONS}/{uuid.uuid4()}")
    error = assert_error(response, 500, "FET-0002", "Internal Server Error")
    assert error["message"] == INTERNAL_ERROR_MESSAGE
    assert response.headers["x-request-id"]


async def test_store_outage_is_503_fet_0003(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    async def down(*_: object, **__: object) -> object:
        raise StoreUnavailableError("metadata store failed")

    monkeypatch.setattr(h.runtime.store, "list_connections", down)
    response = await h.client.get(CONNECTIONS)
    assert_error(response, 503, "FET-0003", "Service Unavailable")


# --- CORS -----------------------------------------------------------------------------------


async def test_no_cors_headers_by_default(h: Harness) -> None:
    response = await h.client.get("/health", headers={"Origin": "https://app.example"})
    assert not any(k.startswith("access-control-") for k in response.headers)
    preflight = await h.client.options(
        CONNECTIONS,
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
    )
    assert_error(preflight, 405, "FET-0008")


async def test_allowed_origin_gets_cors_headers(make_harness: HarnessFactory) -> None:
    h = await make_harness(env={"CORS_ALLOWED_ORIGINS": "https://app.example, https://b.example"})
    response = await h.client.get("/health", headers={"Origin": "https://b.example"})
    assert response.headers["access-control-allow-origin"] == "https://b.example"
    assert "access-control-allow-credentials" not in response.headers
    other = await h.client.get("/health", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


async def test_preflight_from_allowed_origin_is_204(make_harness: HarnessFactory) -> None:
    h = await make_harness(env={"CORS_ALLOWED_ORIGINS": "https://app.example"})
    headers = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, x-product-name",
    }
    response = await h.client.options(CONNECTIONS, headers=headers)
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "https://app.example"
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "x-product-name" in response.headers["access-control-allow-headers"]
    assert "access-control-allow-credentials" not in response.headers
    assert response.headers["x-request-id"]
    denied = await h.client.options(CONNECTIONS, headers={**headers, "Origin": "https://x.example"})
    assert_error(denied, 405, "FET-0008")


async def test_star_allows_every_origin_only_when_listed(make_harness: HarnessFactory) -> None:
    h = await make_harness(env={"CORS_ALLOWED_ORIGINS": "*"})
    response = await h.client.get("/health", headers={"Origin": "https://any.example"})
    assert response.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in response.headers


async def test_connection_create_uses_location_free_201(h: Harness) -> None:
    response = await h.create(pg_body())
    assert response.status_code == 201
    assert response.headers["content-type"] == "application/json"
