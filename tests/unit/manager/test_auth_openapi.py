"""§12.1–§12.3 in ``/openapi.json``: with ``AUTH_MODE=jwt`` the document declares the HTTP
bearer (JWT) scheme, and every business operation its ``security`` requirement (its §12.3
scope as the role) and the 401/403 answers, while the operational routes stay open. With
``AUTH_MODE=none`` it declares no security at all: it describes the deployment serving it,
whose routes need no token. ``createdBy`` is documented on connections and jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openapi_spec_validator

from tests.fakes.jwks_harness import auth_app, secret_env
from tests.unit.manager.test_auth_scopes import ID, ROUTES

OPEN = {"/health", "/readyz", "/readyz/tenant/{id}", "/metrics", "/version"}


def _operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): op
        for path, ops in document["paths"].items()
        for method, op in ops.items()
    }


async def _document(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    async with auth_app(tmp_path, env) as app:
        response = await app.client.get("/openapi.json")
        assert response.status_code == 200
        document: dict[str, Any] = response.json()
        return document


async def test_jwt_document_declares_the_bearer_scheme(tmp_path: Path) -> None:
    document = await _document(tmp_path, secret_env())
    openapi_spec_validator.validate(document)  # still a valid OpenAPI 3.1 document
    scheme = document["components"]["securitySchemes"]["bearerAuth"]
    assert {k: scheme[k] for k in ("type", "scheme", "bearerFormat")} == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
    }
    operations = _operations(document)
    guarded = {(m, p.replace(ID, "{id}")): s.value for m, p, s, _ in ROUTES}
    assert len(guarded) == 17
    for key, scope in guarded.items():
        op = operations[key]
        assert op["security"] == [{"bearerAuth": [scope]}], key
        for status in ("401", "403"):
            ref = op["responses"][status]["content"]["application/json"]["schema"]["$ref"]
            assert ref == "#/components/schemas/ErrorBody", key
        assert scope in op["responses"]["403"]["description"]
        assert "WWW-Authenticate" in op["responses"]["401"]["headers"]
    for (_method, path), op in operations.items():
        if path in OPEN:
            assert "security" not in op, path
            assert "401" not in op["responses"], path
    assert set(guarded) | {("GET", p) for p in OPEN} == set(operations)
    assert "security" not in document  # no global requirement: operational routes are open


async def test_none_document_declares_no_security(tmp_path: Path) -> None:
    document = await _document(tmp_path, {})
    assert "securitySchemes" not in document["components"]
    for key, op in _operations(document).items():
        assert "security" not in op, key
        assert "401" not in op["responses"], key
        # The only 403 without authentication: a state-changing request from another site.
        if key[0] in ("POST", "PUT", "PATCH", "DELETE"):
            assert "FET-0014" in op["responses"]["403"]["description"], key
        else:
            assert "403" not in op["responses"], key


async def test_created_by_is_documented(tmp_path: Path) -> None:
    document = await _document(tmp_path, secret_env())
    schemas = document["components"]["schemas"]
    for model in ("ConnectionResponse", "JobResponse"):
        assert "createdBy" in schemas[model]["properties"], model
        assert "createdBy" not in schemas[model].get("required", []), model
