"""§2.5.1 / §2.9.1 / §13, attacked through the HTTP API of a running embedded process: a
SQLite file that passed the ``SQLITE_ALLOWED_DIR`` check and was then replaced by a symbolic
link is never read, whether the link leads outside the directory or to another file inside it.

Every route that opens the file re-checks it (test, schema, the job-creation live test), and
each answers with its connect-failure form; the outside file's tables never appear.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from fetcher.cli.demo_data import build_sample_database
from tests.e2e.conftest import E2E
from tests.e2e.harness import embedded_fetcher

pytestmark = E2E

PRODUCT_HEADERS = {"X-Product-Name": "payments"}
CONNECT_FAILURE = (
    "The adapter failed to connect to the target data source. Check credentials and network access."
)
SECRET_TABLE = "outside_secret"


@pytest_asyncio.fixture(loop_scope="session")
async def embedded(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Path, Path]]:
    """An embedded ``fetcher run`` (no broker); yields its client, the allowed directory and a
    SQLite file outside it."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    outside = tmp_path / "outside.db"
    db = sqlite3.connect(outside)
    db.execute(f"CREATE TABLE {SECRET_TABLE} (token TEXT)")
    db.execute(f"INSERT INTO {SECRET_TABLE} VALUES ('must-never-be-read')")
    db.commit()
    db.close()
    async with (
        embedded_fetcher(tmp_path, SQLITE_ALLOWED_DIR=str(allowed)) as process,
        httpx.AsyncClient(
            base_url=process.base_url, timeout=30.0, headers=PRODUCT_HEADERS
        ) as client,
    ):
        yield client, allowed, outside


async def create(client: httpx.AsyncClient, name: str, path: Path) -> str:
    response = await client.post(
        "/v1/management/connections",
        json={"configName": name, "type": "SQLITE", "databaseName": str(path)},
    )
    assert response.status_code == 201, response.text
    connection_id: str = response.json()["id"]
    return connection_id


async def probe_status(client: httpx.AsyncClient, connection_id: str) -> str:
    response = await client.post(f"/v1/management/connections/{connection_id}/test")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return str(body["status"])


async def assert_refused_everywhere(
    client: httpx.AsyncClient, connection_id: str, name: str
) -> None:
    tested = await client.post(f"/v1/management/connections/{connection_id}/test")
    assert tested.status_code == 200, tested.text
    assert tested.json()["status"] == "failure"
    assert tested.json()["message"] == CONNECT_FAILURE

    schema = await client.get(f"/v1/management/connections/{connection_id}/schema")
    assert schema.status_code == 502, schema.text
    assert schema.json()["code"] == "FET-1041"
    assert SECRET_TABLE not in schema.text

    job = await client.post(
        "/v1/fetcher",
        json={
            "dataRequest": {"mappedFields": {name: {"accounts": ["id"]}}},
            "metadata": {"source": "payments"},
        },
    )
    assert job.status_code == 400, job.text
    assert job.json()["code"] == "FET-1040"
    assert SECRET_TABLE not in job.text


def swap_for_symlink(path: Path, target: Path) -> None:
    """What the attacker does after the connection was accepted: replace the file by a link."""
    os.unlink(path)
    path.symlink_to(target)


@pytest.mark.parametrize("leads", ["outside", "inside"])
async def test_file_swapped_for_a_symlink_is_refused(
    embedded: tuple[httpx.AsyncClient, Path, Path], leads: str
) -> None:
    client, allowed, outside = embedded
    path = allowed / f"ledger-{leads}.db"
    build_sample_database(path)
    name = f"swap_{leads}"
    connection_id = await create(client, name, path)
    assert await probe_status(client, connection_id) == "success"
    schema = await client.get(f"/v1/management/connections/{connection_id}/schema")
    assert schema.status_code == 200, schema.text
    assert "accounts" in [table["name"] for table in schema.json()["tables"]]

    if leads == "outside":
        target = outside
    else:  # a link to a valid database inside the directory: still a link (§2.5.1)
        target = allowed / "other.db"
        build_sample_database(target)
    swap_for_symlink(path, target)
    await assert_refused_everywhere(client, connection_id, name)


async def test_a_restored_file_is_accepted_again(
    embedded: tuple[httpx.AsyncClient, Path, Path],
) -> None:
    client, allowed, outside = embedded
    path = allowed / "ledger-restored.db"
    build_sample_database(path)
    connection_id = await create(client, "swap_restored", path)
    swap_for_symlink(path, outside)
    assert await probe_status(client, connection_id) == "failure"
    os.unlink(path)
    build_sample_database(path)
    assert await probe_status(client, connection_id) == "success"
