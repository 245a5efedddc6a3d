"""Issue 24, items 4–6, through a running ``fetcher run`` (embedded mode: the Manager API and
the Worker in one real process, SQLite store), from outside over HTTP:

4. a hostile PostgreSQL server (:mod:`tests.fakes.fake_pg_server`) that answers every query
   with one ``int4`` column where the catalog has six: ``GET …/schema`` answers ``502
   FET-1042`` (not ``500 FET-0002``) and a job fails with the §4.5 discovery text naming the
   six columns (not ``internal error``); no unpacking error reaches the log;
5. two ``Authorization`` headers → ``401`` with ``error="invalid_request"``, in either order
   (the first one used to win: valid then garbage passed);
6. ``scope`` is split on U+0020 only: ``"x\\tfetcher:admin"`` grants nothing (``403``), while
   ``"x fetcher:admin"`` grants admin.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from tests.e2e.test_http_edge_requests import Embedded, embedded_process
from tests.fakes.fake_pg_server import FakePgServer
from tests.fakes.jwks_harness import SECRET, secret_env
from tests.fakes.jwks_server import claims

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

CONNECTIONS = "/v1/management/connections"
HEADERS = {"X-Product-Name": "payments", "Content-Type": "application/json"}
PROBE = f"/v1/fetcher/{uuid.uuid4()}"
SIX = "(table_schema, table_name, column_name, data_type, udt_name, is_enum)"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    with embedded_process(tmp_path_factory.mktemp("edges"), LOG_LEVEL="info") as running:
        yield running


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    """The same process with ``AUTH_MODE=jwt`` and an HS256 secret."""
    with embedded_process(tmp_path_factory.mktemp("auth"), **secret_env()) as running:
        yield running


def token(**extra: Any) -> str:
    return jwt.encode(claims(**extra), SECRET, algorithm="HS256")


async def _job_status(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    async with asyncio.timeout(60):
        while True:
            job: dict[str, Any] = (await client.get(f"/v1/fetcher/{job_id}")).json()
            if job["status"] in ("completed", "failed"):
                return job
            await asyncio.sleep(0.2)


async def test_a_catalog_of_one_int_column_is_a_discovery_error_not_a_500(
    server: Embedded,
) -> None:
    name = f"pg_{secrets.token_hex(4)}"
    async with (
        FakePgServer(accept=True, ask_password=False, rows=[(7,)]) as fake,
        httpx.AsyncClient(base_url=server.base_url, timeout=60) as client,
    ):
        body = {
            "configName": name,
            "type": "POSTGRESQL",
            "host": "127.0.0.1",
            "port": fake.port,
            "databaseName": "app",
            "userName": "reader",
            "password": "pw",
        }
        created = await client.post(CONNECTIONS, json=body, headers=HEADERS)
        assert created.status_code == 201, created.text
        schema = await client.get(f"{CONNECTIONS}/{created.json()['id']}/schema")
        assert schema.status_code == 502, schema.text
        assert schema.json()["code"] == "FET-1042"
        job = {
            "dataRequest": {"mappedFields": {name: {"public.accounts": ["id"]}}},
            "metadata": {"source": "payments"},
        }
        submitted = await client.post("/v1/fetcher", json=job, headers=HEADERS)
        expected = (
            f"failed to discover datasource schema '{name}': the catalog answered a row of "
            f"1 value(s) where 6 are expected {SIX}"
        )
        if submitted.status_code in (200, 202):
            failed = await _job_status(client, submitted.json()["jobId"])
            assert failed["status"] == "failed"
            assert failed["metadata"]["error"] == expected
        else:  # refused while planning: the same text, never "internal error"
            assert submitted.status_code < 500, submitted.text
            assert "internal error" not in submitted.text
    log = server.log.read_text(errors="replace")
    assert "not enough values to unpack" not in log
    assert "FET-0002" not in log
    assert f"where 6 are expected {SIX}" in log


async def test_two_authorization_headers_are_refused_in_either_order(guarded: Embedded) -> None:
    good = f"Bearer {token()}"
    async with httpx.AsyncClient(base_url=guarded.base_url, timeout=30) as client:
        single = await client.get(PROBE, headers={"Authorization": good})
        assert single.status_code == 404, single.text  # the token alone is accepted
        for pair in ((good, "Bearer garbage"), ("Bearer garbage", good), (good, good)):
            headers = httpx.Headers([("Authorization", pair[0]), ("Authorization", pair[1])])
            answer = await client.get(PROBE, headers=headers)
            assert answer.status_code == 401, (pair, answer.text)
            assert answer.json()["code"] == "FET-0010"
            assert answer.json()["message"] == "missing or invalid bearer token"
            assert answer.headers["www-authenticate"] == (
                'Bearer realm="fetcher", error="invalid_request"'
            )


@pytest.mark.parametrize(
    ("scope", "status"),
    [
        ("x\tfetcher:admin", 403),
        ("fetcher:admin\nx", 403),
        ("x\u00a0fetcher:admin", 403),
        ("x fetcher:admin", 404),
        ("  fetcher:jobs:read  ", 404),
    ],
)
async def test_scopes_are_split_on_spaces_only(guarded: Embedded, scope: str, status: int) -> None:
    async with httpx.AsyncClient(base_url=guarded.base_url, timeout=30) as client:
        answer = await client.get(PROBE, headers={"Authorization": f"Bearer {token(scope=scope)}"})
    assert answer.status_code == status, answer.text
    if status == 403:
        assert answer.json() == {
            **answer.json(),
            "code": "FET-0011",
            "message": "token lacks scope fetcher:jobs:read",
        }
