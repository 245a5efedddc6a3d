"""``/openapi.json`` is byte-identical to the saved documents of six deployments.

The request schemas are generated from the same rule objects as the validators
(:mod:`fetcher.services.api.shapes`, :mod:`fetcher.services.connections.rules`); a refactoring of
those rules must not change one byte of what a deployment publishes. Each snapshot is the body
``GET /openapi.json`` answered, as bytes. Deployments: embedded mode (no SQLITE), embedded with
``SQLITE_ALLOWED_DIR`` (the SQLITE branch), manager mode with ``AUTH_MODE=none``,
``AUTH_MODE=jwt``, ``MULTI_TENANT_ENABLED=true``, and a lowered ``MAX_PAGINATION_LIMIT``.

When the API changes on purpose, rewrite them and review the diff:
``.venv/bin/python -m tests.unit.manager.test_openapi_snapshots``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.fakes.jwks_harness import auth_app, secret_env

SNAPSHOTS = Path(__file__).parent / "openapi_snapshots"

#: Deployment name → its environment (over ``base_env``); ``{dir}`` is a temporary directory.
DEPLOYMENTS: Mapping[str, Mapping[str, str]] = {
    "embedded": {},
    "embedded_sqlite": {"SQLITE_ALLOWED_DIR": "{dir}"},
    "manager_auth_none": {"FETCHER_MODE": "manager", "AUTH_MODE": "none"},
    "manager_auth_jwt": {"FETCHER_MODE": "manager", **secret_env()},
    "manager_multi_tenant": {
        "FETCHER_MODE": "manager",
        **secret_env(),
        "MULTI_TENANT_ENABLED": "true",
    },
    "embedded_pagination_37": {"MAX_PAGINATION_LIMIT": "37"},
}


async def served_document(tmp_path: Path, name: str) -> bytes:
    """The bytes of ``/openapi.json`` of deployment ``name``."""
    env = {key: value.format(dir=tmp_path) for key, value in DEPLOYMENTS[name].items()}
    if env.get("FETCHER_MODE") == "manager":
        env |= {"DATABASE_URL": "postgresql://u@db/x", "RABBITMQ_HOST": "rabbit"}
    async with auth_app(tmp_path, env, wait=False) as app:
        response = await app.client.get("/openapi.json")
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        return response.content


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
async def test_openapi_document_is_byte_identical(tmp_path: Path, name: str) -> None:
    expected = (SNAPSHOTS / f"{name}.json").read_bytes()
    served = await served_document(tmp_path, name)
    if served != expected:
        where = first_difference(json.loads(expected), json.loads(served)) or "bytes only"
        pytest.fail(f"/openapi.json of {name} changed at {where}; see the module docstring")


def first_difference(expected: object, served: object, path: str = "") -> str:
    """The JSON path where two documents first differ (key order included), for the message."""
    if isinstance(expected, dict) and isinstance(served, dict):
        if list(expected) != list(served):
            return f"{path or '/'}: keys {list(expected)} != {list(served)}"
        for key in expected:
            found = first_difference(expected[key], served[key], f"{path}/{key}")
            if found:
                return found
        return ""
    if isinstance(expected, list) and isinstance(served, list) and len(expected) == len(served):
        for index, (left, right) in enumerate(zip(expected, served, strict=True)):
            found = first_difference(left, right, f"{path}/{index}")
            if found:
                return found
        return ""
    return "" if expected == served else f"{path or '/'}: {expected!r} != {served!r}"


async def _write_all() -> None:
    for name in sorted(DEPLOYMENTS):
        with tempfile.TemporaryDirectory() as directory:
            served = await served_document(Path(directory), name)
        (SNAPSHOTS / f"{name}.json").write_bytes(served)
        print(f"{name}: {len(served)} bytes")


if __name__ == "__main__":
    asyncio.run(_write_all())
