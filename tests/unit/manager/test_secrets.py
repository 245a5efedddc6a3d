"""Architecture rule 12 through HTTP: a sentinel password never appears in any response body,
header, captured log line or metric (contract §2.2, §2.5, §9.2)."""

from __future__ import annotations

import logging

import httpx
import pytest

from fetcher.engine import ConnectionDescriptor
from fetcher.engine.types import EngineType
from fetcher.services.connections.internal_datasources import internal_connection_id
from tests.unit.manager.conftest import Harness, HarnessFactory, pg_body, table

SENTINEL = "S3NTINEL-pa55word-9f8e7d"
KEY_SENTINEL = "-----BEGIN PRIVATE KEY-----\nKEYSENTINEL0042\n-----END PRIVATE KEY-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nc\n-----END CERTIFICATE-----\n"
C = "/v1/management/connections"


def _leaks(response: httpx.Response) -> bool:
    text = response.text + "".join(f"{k}: {v}\n" for k, v in response.headers.items())
    return SENTINEL in text or "KEYSENTINEL0042" in text


async def test_sentinel_never_leaves_the_process(
    make_harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    internal = ConnectionDescriptor(
        config_name="ledger_ro",
        type=EngineType.POSTGRESQL,
        host="internal.db",
        port=5432,
        database="ledger",
        username="ro",
        password=SENTINEL,
        internal=True,
        connection_id=internal_connection_id("ledger_ro"),
    )
    h: Harness = await make_harness(internal={"ledger_ro": internal})
    responses: list[httpx.Response] = []
    ssl = {"mode": "require", "cert": CERT, "key": KEY_SENTINEL}
    created = await h.create(pg_body(password=SENTINEL, ssl=ssl))
    responses.append(created)
    ident = created.json()["id"]
    h.db("pg_main").add(table("public", "accounts", "id"))
    h.db("pg_main").fail_on["connect"] = f"auth failed for {SENTINEL}2 on db.example.com"
    h.db("ledger_ro").fail_on["connect"] = f"auth failed for {SENTINEL}"
    responses += [
        await h.client.get(f"{C}/{ident}"),
        await h.client.get(C),
        await h.client.patch(f"{C}/{ident}", json={"password": SENTINEL + "2"}),
        await h.client.post(f"{C}/{ident}/test"),
        await h.client.post(f"{C}/{internal_connection_id('ledger_ro')}/test"),
        await h.client.get(f"{C}/{ident}/schema"),
        await h.client.post(
            f"{C}/validate-schema", json={"mappedFields": {"pg_main": {"accounts": ["id"]}}}
        ),
        await h.create(pg_body("pg_main", password=SENTINEL)),
        await h.create(pg_body("bad name", password=SENTINEL, port="x")),
        await h.client.post(
            "/v1/fetcher",
            json={
                "dataRequest": {"mappedFields": {"pg_main": {"accounts": ["id"]}}},
                "metadata": {"source": "payments"},
            },
        ),
        await h.client.get("/metrics"),
        await h.client.get("/readyz"),
        await h.client.get("/v1/events"),
    ]
    statuses = [r.status_code for r in responses]
    assert 201 in statuses
    assert 400 in statuses
    assert 502 in statuses
    for response in responses:
        assert not _leaks(response), response.request.url
    for record in caplog.records:
        assert SENTINEL not in record.getMessage()
        assert "KEYSENTINEL0042" not in record.getMessage()
    stored = await h.store.get_connection(ident, tenant="")
    assert stored is not None
    assert SENTINEL not in repr(stored)
