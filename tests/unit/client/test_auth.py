"""The client against an in-process ``AUTH_MODE=jwt`` Manager (HS256 secret, §12): the token
goes on every business request and only there, a function can hand out a fresh token per
request, 401/403 become ``AuthenticationError``/``PermissionDeniedError`` with the challenge and
the missing scope, and the token never shows in ``repr`` or an error. The route table's scopes
are pinned to the jwt ``/openapi.json``."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from fetcher.client import (
    ROUTES,
    AsyncFetcherClient,
    AuthenticationError,
    FetcherClient,
    FetcherError,
    PermissionDeniedError,
)
from fetcher.client.types import SCHEMAS, ConnectionCreate
from tests.fakes.jwks_harness import SECRET, AuthApp, auth_app, secret_env
from tests.fakes.jwks_server import claims

PG: ConnectionCreate = {
    "configName": "pg_main",
    "type": "POSTGRESQL",
    "host": "db.example.com",
    "port": 5432,
    "databaseName": "ledger",
    "userName": "reader",
    "password": "s3cret-pass",
}
OTHER: ConnectionCreate = {**PG, "configName": "pg_other"}
CHALLENGE = 'Bearer realm="fetcher"'
ADMIN = "fetcher:admin"


def token(sub: str = "alice", scope: str | None = ADMIN, **extra: Any) -> str:
    return jwt.encode(claims(sub=sub, scope=scope, **extra), SECRET, algorithm="HS256")


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[AuthApp]:
    async with auth_app(tmp_path, secret_env()) as running:
        yield running


def client(app: AuthApp, token: Any = None) -> AsyncFetcherClient:
    transport = httpx.ASGITransport(app=app.app)
    return AsyncFetcherClient("http://127.0.0.1", token=token, transport=transport)


def assert_hidden(secret: str, error: BaseException) -> None:
    """Neither the token nor its signature appears in the error's text or attributes."""
    texts = [str(error), repr(error), repr(vars(error))]
    for text in texts:
        assert secret not in text
        assert secret.rsplit(".", 1)[1] not in text


def test_route_scopes_are_the_jwt_documents_security(app: AuthApp) -> None:
    doc = app.app.openapi()
    for name, route in ROUTES.items():
        op = doc["paths"][route.path][route.method.lower()]
        declared = [scope for req in op.get("security", []) for scope in req.get("bearerAuth", [])]
        assert declared == ([route.scope] if route.scope else []), name
    assert set(doc["components"]["schemas"]) == set(SCHEMAS)


async def test_a_token_creates_and_reads_back_as_its_subject(app: AuthApp) -> None:
    minted = token("svc-payments")
    async with client(app, minted) as api:
        assert minted not in repr(api)
        assert "token=<redacted>" in repr(api)
        created = await api.create_connection(PG, product="payments")
        assert created["createdBy"] == "svc-payments"
        again = await api.get_connection(created["id"])
        assert again["createdBy"] == "svc-payments"
        listed = await api.list_connections(product="payments")
        assert [c["id"] for c in listed["items"]] == [created["id"]]
        assert (await api.events(limit=5))["items"] == []
        assert (await api.health())["status"] == "healthy"


async def test_no_token_is_an_authentication_error_with_the_challenge(app: AuthApp) -> None:
    async with client(app) as api:
        with pytest.raises(AuthenticationError) as caught:
            await api.list_connections()
    error = caught.value
    assert (error.status, error.code, error.title) == (401, "FET-0010", "Unauthorized")
    assert error.message == "missing or invalid bearer token"
    assert error.www_authenticate == CHALLENGE
    assert isinstance(error, FetcherError)


@pytest.mark.parametrize(
    "bad",
    [
        token(exp=1_000_000),  # expired long ago
        token(iss="https://elsewhere.test"),
        jwt.encode(claims(), b"another-secret-of-thirty-two-bytes!!", algorithm="HS256"),
    ],
    ids=["expired", "wrong issuer", "wrong key"],
)
async def test_a_refused_token_is_invalid_token_and_stays_hidden(app: AuthApp, bad: str) -> None:
    async with client(app, bad) as api:
        with pytest.raises(AuthenticationError) as caught:
            await api.get_job("0190a1b2-0000-7000-8000-000000000001")
    assert caught.value.www_authenticate == f'{CHALLENGE}, error="invalid_token"'
    assert_hidden(bad, caught.value)


async def test_a_missing_scope_is_a_permission_error_naming_it(app: AuthApp) -> None:
    reader = token("ro", "fetcher:connections:read")
    async with client(app, reader) as api:
        assert (await api.list_connections())["items"] == []
        with pytest.raises(PermissionDeniedError) as caught:
            await api.create_connection(PG, product="payments")
        with pytest.raises(PermissionDeniedError) as events:
            await api.events()
    error = caught.value
    assert (error.status, error.code, error.title) == (403, "FET-0011", "Forbidden")
    assert error.missing_scope == "fetcher:connections:write"
    assert events.value.missing_scope == "fetcher:events:read"
    assert error.www_authenticate is None
    assert_hidden(reader, error)


async def test_a_product_restricted_token_outside_its_products(app: AuthApp) -> None:
    restricted = token("billing-bot", products=["billing"])
    async with client(app, restricted) as api:
        with pytest.raises(PermissionDeniedError) as caught:
            await api.create_connection(PG, product="payments")
        with pytest.raises(PermissionDeniedError) as unassigned:
            await api.list_unassigned()
    assert caught.value.code == "FET-0012"
    assert caught.value.message == "token is not allowed to act for product 'payments'"
    assert caught.value.missing_scope is None
    assert unassigned.value.code == "FET-0012"


async def test_a_token_function_is_asked_before_every_business_request(app: AuthApp) -> None:
    """Each call gets the function's current token (a new subject each time here), so a
    caller refreshes short-lived tokens there; the open routes never ask for one."""
    subjects = (f"rotating-{n}" for n in itertools.count(1))
    handed: list[str] = []

    def fresh() -> str:
        handed.append(token(next(subjects)))
        return handed[-1]

    async with client(app, fresh) as api:
        await api.health()
        await api.version()
        assert handed == []
        first = await api.create_connection(PG, product="payments")
        second = await api.create_connection(OTHER, product="payments")
    assert (first["createdBy"], second["createdBy"]) == ("rotating-1", "rotating-2")
    assert len(handed) == 2


async def test_the_async_client_awaits_an_async_token_function(app: AuthApp) -> None:
    async def fetch_token() -> str:
        return token("async-sub")

    async with client(app, fetch_token) as api:
        created = await api.create_connection(PG, product="payments")
    assert created["createdBy"] == "async-sub"


def recording() -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "healthy", "version": "x"})
        return httpx.Response(200, json={"items": [], "next": "0"})

    return seen, httpx.MockTransport(handler)


def test_the_sync_client_sends_the_functions_token_on_business_routes_only() -> None:
    tokens: Iterator[str] = iter(["tok-1", "tok-2"])
    seen, transport = recording()
    with FetcherClient("http://f", token=lambda: next(tokens), transport=transport) as api:
        api.health()
        api.events()
        api.events()
    assert [r.headers.get("authorization") for r in seen] == [
        None,
        "Bearer tok-1",
        "Bearer tok-2",
    ]


def test_unusable_tokens_are_refused_without_showing_them() -> None:
    secret = "abc def"  # a space: not a bearer credential
    for bad in ("", secret, "tok\r\nX-Injected: 1"):
        with pytest.raises(ValueError, match="bearer token is empty") as caught:
            FetcherClient("http://f", token=bad)
        if bad:
            assert bad not in str(caught.value)
    with pytest.raises(TypeError):
        FetcherClient("http://f", token=b"bytes")  # type: ignore[arg-type]
    seen, transport = recording()
    with FetcherClient("http://f", token=lambda: secret, transport=transport) as api:
        with pytest.raises(ValueError, match="bearer token is empty") as returned:
            api.events()
        assert secret not in str(returned.value)
        assert seen == []  # nothing was sent


def test_the_sync_client_refuses_an_async_token_function() -> None:
    async def later() -> str:
        return "tok"

    seen, transport = recording()
    with (
        FetcherClient("http://f", token=later, transport=transport) as api,  # type: ignore[arg-type]
        pytest.raises(TypeError, match="AsyncFetcherClient"),
    ):
        api.events()
    assert seen == []
