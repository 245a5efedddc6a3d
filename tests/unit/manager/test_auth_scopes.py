"""§12.1/§12.3: the whole scope matrix, table-driven: every business route × (no token,
every wrong scope, its scope, ``fetcher:admin``), and authentication before every other check
of a route (path ID, ``X-Product-Name``, ``Content-Type``, body). The operational routes stay
open."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from fetcher.services.principal import Scope
from tests.fakes.jwks_harness import SECRET, AuthApp, auth_app, secret_env
from tests.fakes.jwks_server import claims

ID = str(uuid.uuid4())
C = "/v1/management/connections"

#: (method, path, scope, request keywords): every route of §2.6, §2.8, §2.12 and §14.2.
ROUTES: list[tuple[str, str, Scope, dict[str, Any]]] = [
    ("POST", C, Scope.CONNECTIONS_WRITE, {"json": {}, "headers": {"X-Product-Name": "p"}}),
    ("GET", C, Scope.CONNECTIONS_READ, {}),
    ("GET", f"{C}/unassigned", Scope.CONNECTIONS_READ, {}),
    ("GET", f"{C}/{ID}", Scope.CONNECTIONS_READ, {}),
    ("PATCH", f"{C}/{ID}", Scope.CONNECTIONS_WRITE, {"json": {"port": 5432}}),
    ("DELETE", f"{C}/{ID}", Scope.CONNECTIONS_WRITE, {}),
    ("POST", f"{C}/{ID}/test", Scope.CONNECTIONS_READ, {}),
    ("GET", f"{C}/{ID}/schema", Scope.CONNECTIONS_READ, {}),
    ("POST", f"{C}/validate-schema", Scope.CONNECTIONS_READ, {"json": {}}),
    ("POST", f"{C}/{ID}/assign", Scope.CONNECTIONS_WRITE, {"headers": {"X-Product-Name": "p"}}),
    ("POST", "/v1/fetcher", Scope.JOBS_WRITE, {"json": {}}),
    ("GET", f"/v1/fetcher/{ID}", Scope.JOBS_READ, {}),
    ("GET", "/v1/fetcher", Scope.JOBS_READ, {}),
    ("GET", "/v1/events", Scope.EVENTS_READ, {}),
    ("GET", f"/v1/fetcher/{ID}/result", Scope.RESULTS_READ, {}),
    ("POST", f"/v1/fetcher/{ID}/cancel", Scope.JOBS_WRITE, {}),
    ("POST", f"/v1/fetcher/{ID}/retry", Scope.JOBS_WRITE, {}),
]
NON_ADMIN = [s for s in Scope if s is not Scope.ADMIN]
CHALLENGE = 'Bearer realm="fetcher"'


def token(*scopes: str, scp: list[str] | None = None) -> str:
    body = claims(scope=" ".join(scopes) if scopes else None, scp=scp)
    return jwt.encode(body, SECRET, algorithm="HS256")


async def call(
    app: AuthApp, method: str, path: str, bearer: str | None, **kw: Any
) -> httpx.Response:
    headers = dict(kw.pop("headers", {}))
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return await app.client.request(method, path, headers=headers, **kw)


@pytest.fixture
async def app(tmp_path: Path) -> Any:
    async with auth_app(tmp_path, secret_env()) as running:
        yield running


def _id(route: tuple[str, str, Scope, dict[str, Any]]) -> str:
    return f"{route[0]} {route[1].replace(ID, '{id}')}"


@pytest.mark.parametrize("route", ROUTES, ids=_id)
async def test_scope_matrix(app: AuthApp, route: tuple[str, str, Scope, dict[str, Any]]) -> None:
    method, path, scope, kw = route
    missing = await call(app, method, path, None, **kw)
    assert missing.status_code == 401, missing.text
    assert missing.json()["code"] == "FET-0010"
    assert missing.headers["www-authenticate"] == CHALLENGE
    for wrong in NON_ADMIN:
        if wrong is scope:
            continue
        denied = await call(app, method, path, token(wrong.value), **kw)
        assert denied.status_code == 403, (wrong, denied.text)
        assert denied.json() == {
            "code": "FET-0011",
            "title": "Forbidden",
            "message": f"token lacks scope {scope.value}",
        }
    no_scope = await call(app, method, path, token(), **kw)
    assert no_scope.status_code == 403, no_scope.text
    for granted in (token(scope.value), token(scp=[scope.value]), token("fetcher:admin")):
        allowed = await call(app, method, path, granted, **kw)
        assert allowed.status_code not in (401, 403), allowed.text


#: Requests that break a later check of the route: a bad path ID, a missing or bad
#: X-Product-Name, a body without Content-Type, an unparsable body, a bad query parameter.
BROKEN: list[tuple[str, str, Scope, dict[str, Any], str]] = [
    ("GET", f"{C}/not-a-uuid", Scope.CONNECTIONS_READ, {}, "FET-0404"),
    ("PATCH", f"{C}/not-a-uuid", Scope.CONNECTIONS_WRITE, {"json": {}}, "FET-0404"),
    ("DELETE", f"{C}/not-a-uuid", Scope.CONNECTIONS_WRITE, {}, "FET-0404"),
    ("POST", f"{C}/not-a-uuid/test", Scope.CONNECTIONS_READ, {}, "FET-0404"),
    ("GET", f"{C}/not-a-uuid/schema", Scope.CONNECTIONS_READ, {}, "FET-0404"),
    ("POST", f"{C}/not-a-uuid/assign", Scope.CONNECTIONS_WRITE, {}, "FET-0403"),
    ("GET", "/v1/fetcher/not-a-uuid", Scope.JOBS_READ, {}, "FET-0404"),
    ("GET", "/v1/fetcher/not-a-uuid/result", Scope.RESULTS_READ, {}, "FET-0404"),
    ("POST", "/v1/fetcher/not-a-uuid/cancel", Scope.JOBS_WRITE, {}, "FET-0404"),
    ("POST", "/v1/fetcher/not-a-uuid/retry", Scope.JOBS_WRITE, {}, "FET-0404"),
    ("POST", C, Scope.CONNECTIONS_WRITE, {"json": {}}, "FET-0403"),
    ("GET", C, Scope.CONNECTIONS_READ, {"headers": {"X-Product-Name": "bad name"}}, "FET-0403"),
    ("GET", C, Scope.CONNECTIONS_READ, {"params": {"limit": "x"}}, "FET-0405"),
    ("POST", "/v1/fetcher", Scope.JOBS_WRITE, {"content": b"{}"}, "FET-0009"),
    ("POST", "/v1/fetcher", Scope.JOBS_WRITE, {"json": None}, "FET-0001"),
    ("POST", f"{C}/validate-schema", Scope.CONNECTIONS_READ, {"content": b"x"}, "FET-0009"),
    ("GET", "/v1/events", Scope.EVENTS_READ, {"params": {"after": "-1"}}, "FET-0405"),
]


@pytest.mark.parametrize("case", BROKEN, ids=lambda c: f"{c[0]} {c[1]} {c[4]}")
async def test_authentication_and_scope_come_first(
    app: AuthApp, case: tuple[str, str, Scope, dict[str, Any], str]
) -> None:
    method, path, scope, kw, later_code = case
    if "json" in kw and kw["json"] is None:
        kw = {"content": b"not json", "headers": {"Content-Type": "application/json"}}
    missing = await call(app, method, path, None, **kw)
    assert missing.status_code == 401, missing.text
    wrong = next(s for s in NON_ADMIN if s is not scope)
    denied = await call(app, method, path, token(wrong.value), **kw)
    assert denied.status_code == 403, denied.text
    assert denied.json()["code"] == "FET-0011"
    # The control: with the right scope the later check does fire.
    reached = await call(app, method, path, token(scope.value), **kw)
    assert reached.json()["code"] == later_code, reached.text


@pytest.mark.parametrize("path", ["/health", "/readyz", "/metrics", "/version", "/openapi.json"])
async def test_operational_routes_stay_open(app: AuthApp, path: str) -> None:
    response = await app.client.get(path)
    assert response.status_code == 200, response.text
    garbage = await app.client.get(path, headers={"Authorization": "Bearer garbage"})
    assert garbage.status_code == 200


async def test_docs_and_tenant_readiness_stay_open(app: AuthApp) -> None:
    assert (await app.client.get("/docs")).status_code == 200
    assert (await app.client.get("/readyz/tenant/acme")).json()["code"] == "FET-1080"


async def test_authentication_comes_before_the_rate_limit(app: AuthApp) -> None:
    path = f"{C}/{ID}/test"
    answers = [
        (await call(app, "POST", path, token("fetcher:connections:read"))).status_code
        for _ in range(11)
    ]
    assert answers[-1] == 429, answers  # the control: the limit is reached
    assert (await call(app, "POST", path, None)).status_code == 401
    assert (await call(app, "POST", path, token("fetcher:jobs:read"))).status_code == 403


@pytest.mark.parametrize(
    ("scope", "granted"),
    [
        ("x\tfetcher:admin", False),
        ("fetcher:admin\r\nx", False),
        ("x\u3000fetcher:admin", False),
        ("x  fetcher:admin ", True),
    ],
)
async def test_scope_is_split_on_u0020_only(app: AuthApp, scope: str, granted: bool) -> None:
    """Issue 24: ``str.split()`` took a tab (or any whitespace) as a separator."""
    bearer = jwt.encode(claims(scope=scope), SECRET, algorithm="HS256")
    answer = await call(app, "GET", f"/v1/fetcher/{ID}", bearer)
    assert answer.status_code == (404 if granted else 403), answer.text


@pytest.mark.parametrize("valid_first", [True, False])
async def test_two_authorization_headers_are_an_invalid_request(
    app: AuthApp, valid_first: bool
) -> None:
    """Issue 24: the first header won, so a gateway checking the last one disagreed."""
    values = [f"Bearer {token('fetcher:admin')}", "Bearer garbage"]
    if not valid_first:
        values.reverse()
    headers = httpx.Headers([("Authorization", value) for value in values])
    answer = await app.client.get(f"/v1/fetcher/{ID}", headers=headers)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == f'{CHALLENGE}, error="invalid_request"'
