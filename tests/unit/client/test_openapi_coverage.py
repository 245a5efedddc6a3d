"""The client and /openapi.json cannot drift: every route (method, path, parameters, request
and success schemas) and every component schema (its property names) is covered."""

from __future__ import annotations

from typing import Any

from fetcher.client import ROUTES, AsyncFetcherClient, FetcherClient
from fetcher.client.types import SCHEMAS
from tests.unit.client.conftest import InProcess

#: Served for humans, not for programs: the Swagger UI page and the document itself.
NOT_CLIENT_ROUTES = {("GET", "/docs"), ("GET", "/openapi.json")}


def _ref(schema: dict[str, Any] | None) -> str | None:
    ref = (schema or {}).get("$ref")
    return ref.rsplit("/", 1)[1] if isinstance(ref, str) else None


def _operations(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): op
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if (method.upper(), path) not in NOT_CLIENT_ROUTES
    }


async def test_every_route_is_a_client_method(manager: InProcess) -> None:
    doc = manager.app.openapi()
    operations = _operations(doc)
    covered = {(r.method, r.path): name for name, r in ROUTES.items()}
    assert set(covered) == set(operations)
    for name in ROUTES:
        assert callable(getattr(FetcherClient, name)), name
        assert callable(getattr(AsyncFetcherClient, name)), name
    for key, op in operations.items():
        route = ROUTES[covered[key]]
        assert set(route.params) == {p["name"] for p in op.get("parameters", [])}, key
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
        assert route.request == _ref(body.get("schema")), key
        ok = {int(code) for code in op["responses"] if code.startswith("2")}
        assert ok <= set(route.ok), key
        success = {
            _ref(content.get("schema"))
            for code, answer in op["responses"].items()
            if code.startswith("2")
            for content in answer.get("content", {}).values()
        } - {None}
        assert success == set(route.responses), key


def _properties(schema: dict[str, Any]) -> set[str]:
    names = set(schema.get("properties", {}))
    for variant in schema.get("anyOf", []) + schema.get("oneOf", []):
        names |= set(variant.get("properties", {}))
    return names


def _required(schema: dict[str, Any]) -> set[str]:
    if "required" in schema:
        return set(schema["required"])
    variants = schema.get("anyOf", []) + schema.get("oneOf", [])
    sets = [set(v.get("required", [])) for v in variants]
    return set.intersection(*sets) if sets else set()


async def test_every_schema_is_a_typeddict_with_the_same_keys(manager: InProcess) -> None:
    schemas = manager.app.openapi()["components"]["schemas"]
    assert set(SCHEMAS) == set(schemas)
    for name, typed in SCHEMAS.items():
        keys = set(typed.__annotations__)
        assert keys == _properties(schemas[name]), name
        assert set(getattr(typed, "__required_keys__", set())) >= _required(schemas[name]), name
