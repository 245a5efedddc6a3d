"""JSON nested deeper than the engine's ``MAX_JSON_DEPTH`` (issue 12, hardening), through a
running embedded ``fetcher run`` and its HTTP API, against PostgreSQL (the batch encoder
process on and off), MariaDB and MongoDB (the nx-27017 wire server).

A value nested 3,000 levels (PostgreSQL accepts ``repeat('[', 3000) || repeat(']', 3000)`` as
``jsonb``) used to fail its job with ``internal error``: ``RecursionError`` escaped from the JSON
parser and the document encoder. Now such a job fails with the §4.5 query text naming the
column and the table, the process stays healthy and keeps working, and a value nested exactly
``MAX_JSON_DEPTH`` levels is stored byte for byte as the engine's reference encoder writes it.
"""

from __future__ import annotations

import json
import secrets
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from fetcher.engine.document import dumps_document
from fetcher.engine.errors import MAX_JSON_DEPTH
from fetcher.engine.ports import Row
from fetcher.engine.values import parse_json_exact_fractions
from tests.contract.engines.mariadb import admin_connect, fresh_database, nested_json_sql
from tests.e2e.conftest import E2E
from tests.e2e.harness import (
    DatabaseFactory,
    FetcherProcess,
    ManagerApi,
    decrypt_result_object,
    derive_cli_key,
    embedded_fetcher,
    eventually,
)
from tests.processes import descendants
from tests.services import mongo_database, mongodb_connection, mysql_connection

pytestmark = E2E

PAST = MAX_JSON_DEPTH + 1
#: jsonb nested 3,000 levels (the scanner cannot descend it), 251 (the writer refuses it) and
#: 250 (objects and arrays alternating, numbers keeping their text), several rows each.
PG_SQL = f"""
CREATE TABLE public.deep (id integer, doc jsonb);
INSERT INTO public.deep VALUES
    (1, '{{"a": 1}}'), (2, (repeat('[', 3000) || repeat(']', 3000))::jsonb), (3, NULL);
CREATE TABLE public.past (id integer, doc jsonb);
INSERT INTO public.past VALUES (1, (repeat('[', {PAST}) || '1.50' || repeat(']', {PAST}))::jsonb);
CREATE TABLE public.at_bound (id integer, doc jsonb);
INSERT INTO public.at_bound
SELECT n, (repeat('{{"k": [', {MAX_JSON_DEPTH // 2}) || n || '.50'
           || repeat(']}}', {MAX_JSON_DEPTH // 2}))::jsonb
FROM generate_series(1, 30) AS n;
ALTER TABLE public.deep ADD COLUMN f integer[];
ALTER TABLE public.past ADD COLUMN f integer[];
ALTER TABLE public.at_bound ADD COLUMN f integer[];
"""
#: With the encoder process on, the jobs also read the array column ``f`` (NULL), which the
#: PostgreSQL fast path (issue 23) does not cover: the general path, whose batches the child
#: encodes. Without it, the same tables take the fast path.


def _failure(datasource: str, column: str, table: str) -> str:
    return (
        f"failed to query datasource '{datasource}': column '{column}' of table '{table}' "
        f"holds a JSON value nested deeper than {MAX_JSON_DEPTH} levels"
    )


@dataclass(frozen=True)
class Embedded:
    host: FetcherProcess
    api: ManagerApi
    objects: Path
    encoder: bool

    async def run(self, datasource: str, table: str, fields: list[str]) -> dict[str, Any]:
        job_id = await self.api.submit({datasource: {table: fields}})
        return await self.api.wait_terminal(job_id, within=60)

    def document(self, job: dict[str, Any]) -> bytes:
        assert job["status"] == "completed", job
        stored = (self.objects / str(job["resultPath"])).read_bytes()
        return decrypt_result_object(derive_cli_key("storage"), stored)

    async def still_serving(self) -> None:
        """The process answers, and never logged an unexpected failure."""
        response = await self.api.http.get(f"{self.api.base_url}/health")
        assert response.status_code == 200, response.text
        logs = self.host.logs()
        assert "Traceback" not in logs
        assert "internal error" not in logs


@pytest_asyncio.fixture(
    scope="module", loop_scope="session", params=[True, False], ids=["encoder-on", "encoder-off"]
)
async def embedded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Embedded]:
    on = bool(request.param)
    workdir = tmp_path_factory.mktemp("deep-json")
    async with (
        embedded_fetcher(workdir, ENCODER_PROCESS_ENABLED=str(on).lower()) as host,
        httpx.AsyncClient(timeout=30) as http,
    ):
        yield Embedded(host, ManagerApi(http, host.base_url), workdir / "state" / "objects", on)


async def test_postgresql_jsonb_nested_too_deep_fails_the_job(
    embedded: Embedded, databases: DatabaseFactory
) -> None:
    source = databases.create("fetcher_e2e_deep", PG_SQL)
    name = f"deep_pg_{secrets.token_hex(3)}"
    await embedded.api.create_connection(
        name, source.name, password="unused", host=source.host, port=source.port
    )
    columns = ["id", "doc", "f"] if embedded.encoder else ["id", "doc"]
    for table in ("deep", "past"):
        job = await embedded.run(name, f"public.{table}", columns)
        assert job["status"] == "failed", job
        assert job["metadata"]["error"] == _failure(name, "doc", f"public.{table}")
        assert "resultPath" not in job

    job = await embedded.run(name, "public.at_bound", columns)
    _, stored = source.query("SELECT id, doc::text FROM public.at_bound")
    rows: list[Row] = [{"doc": parse_json_exact_fractions(d), "id": i} for i, d in stored]
    if embedded.encoder:
        rows = [{**row, "f": None} for row in rows]
    document = embedded.document(job)
    assert document == dumps_document({name: {"at_bound": rows}})
    assert json.loads(document)[name]["at_bound"][0]["doc"] == json.loads(stored[0][1])
    await embedded.still_serving()
    if embedded.encoder:  # the child declined the deep batches; it neither failed nor died

        async def helpers() -> set[int] | None:
            found = descendants(embedded.host.pid)
            return found if len(found) >= 2 else None

        await eventually(helpers, "the encoder process and the resource tracker", within=30)


#: MariaDB's ``json_valid`` stops at 31 levels: deeper text is written with checks off.
MARIADB_SQL = (
    "SET SESSION check_constraint_checks = 0",
    "CREATE TABLE deep (id INT PRIMARY KEY, doc JSON)",
    f"INSERT INTO deep VALUES (1, '[1]'), (2, {nested_json_sql(3000, '1')})",
    "CREATE TABLE at_bound (id INT PRIMARY KEY, doc JSON)",
    f"INSERT INTO at_bound VALUES (1, {nested_json_sql(MAX_JSON_DEPTH, '1.50')}), (2, '[-0]')",
)


async def test_mariadb_json_nested_too_deep_fails_the_job(embedded: Embedded) -> None:
    name = f"deep_my_{secrets.token_hex(3)}"
    async with fresh_database(MARIADB_SQL) as (database, reader, password):
        await embedded.api.create(mysql_connection(database, reader, password, name))
        failed = await embedded.run(name, "deep", ["id", "doc"])
        completed = await embedded.run(name, "at_bound", ["id", "doc"])
        conn = await admin_connect(database)
        try:
            async with conn.cursor() as cursor:
                await cursor.execute("SELECT id, doc FROM at_bound")
                stored = await cursor.fetchall()
        finally:
            conn.close()
    assert failed["status"] == "failed", failed
    assert failed["metadata"]["error"] == _failure(name, "doc", f"{database}.deep")
    assert password not in failed["metadata"]["error"]
    rows: list[Row] = [{"doc": parse_json_exact_fractions(d), "id": i} for i, d in stored]
    assert embedded.document(completed) == dumps_document({name: {"at_bound": rows}})
    await embedded.still_serving()


def _nested_bson(identifier: int, depth: int) -> Any:
    """``{"_id": identifier, "doc": {"a": {"a": … 1}}}`` with ``depth`` documents under
    ``doc``, as raw BSON built without recursion."""
    from bson.raw_bson import RawBSONDocument

    element = b"\x10a\x00" + struct.pack("<i", 1)
    for _ in range(depth):
        element = b"\x03a\x00" + struct.pack("<i", len(element) + 5) + element + b"\x00"
    body = b"\x10_id\x00" + struct.pack("<i", identifier) + b"\x03doc" + element[2:]
    return RawBSONDocument(struct.pack("<i", len(body) + 5) + body + b"\x00")


async def test_mongodb_document_nested_too_deep_fails_the_job(embedded: Embedded) -> None:
    name = f"deep_mg_{secrets.token_hex(3)}"
    async with mongo_database("e2e_deep") as db:
        await db["deep"].insert_many([_nested_bson(1, 400), _nested_bson(2, 1)])
        await db["past"].insert_many([_nested_bson(1, PAST)])
        await db["at_bound"].insert_many([_nested_bson(i, MAX_JSON_DEPTH) for i in (1, 2)])
        await embedded.api.create(mongodb_connection(name, db.name))
        for collection in ("deep", "past"):
            job = await embedded.run(name, collection, ["_id", "doc"])
            assert job["status"] == "failed", job
            assert job["metadata"]["error"] == _failure(name, "doc", collection)
        completed = await embedded.run(name, "at_bound", ["_id", "doc"])
    value: object = 1
    for _ in range(MAX_JSON_DEPTH):
        value = {"a": value}
    rows: list[Row] = [{"_id": 1, "doc": value}, {"_id": 2, "doc": value}]
    assert embedded.document(completed) == dumps_document({name: {"at_bound": rows}})
    await embedded.still_serving()
