"""Wide rows stay within bounded memory (§13 "Bounded memory"; issue 12's memory target),
through a running embedded ``fetcher run`` and its HTTP API, against PostgreSQL, MariaDB,
MongoDB (the nx-27017 wire server) and a SQLite file.

Connectors fetched 2,000 rows at a time whatever their width. 1,000 rows of 150 kB text (a
150 MB document, under the 256 MiB result limit) were one batch, held several times over (the
driver's buffer, the Python values, the encoded bytes, the encrypted part), and a Worker
extracting them peaked at 1.4 GiB. Fetches are now sized by bytes
(``fetcher.adapters.batch_sizing``): the process's peak RSS (``VmHWM``, reset through
``/proc/<pid>/clear_refs`` before the job) must grow by less than a third of the document
while it extracts one, and the stored document must be every row, byte for byte.
"""

from __future__ import annotations

import secrets
import sqlite3
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.contract.engines.mariadb import fresh_database
from tests.e2e.conftest import E2E
from tests.e2e.harness import (
    DatabaseFactory,
    FetcherProcess,
    ManagerApi,
    decrypt_result_object,
    derive_cli_key,
    embedded_fetcher,
)
from tests.processes import status_kib
from tests.services import mongo_database, mongodb_connection, mysql_connection

pytestmark = E2E

MIB = 1024 * 1024
ROWS = 600
#: Characters of each row's ``body``: 600 rows make a document of about 120 MB.
WIDTH = 200_000
#: The peak may grow by less than this while one such document is extracted.
GROWTH_BOUND = ROWS * WIDTH // 3


@dataclass(frozen=True)
class Embedded:
    host: FetcherProcess
    api: ManagerApi
    objects: Path
    samples: Path

    async def extract(self, datasource: str, table: str) -> tuple[bytes, int]:
        """The stored document of one job over ``table`` and the growth of the process's
        peak RSS (bytes) while it ran."""
        Path(f"/proc/{self.host.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
        before = status_kib(self.host.pid, "VmHWM")
        job_id = await self.api.submit({datasource: {table: ["id", "body"]}})
        job = await self.api.wait_terminal(job_id, within=120)
        growth = (status_kib(self.host.pid, "VmHWM") - before) * 1024
        assert job["status"] == "completed", job
        stored = (self.objects / str(job["resultPath"])).read_bytes()
        return decrypt_result_object(derive_cli_key("storage"), stored), growth


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def embedded(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Embedded]:
    if not sys.platform.startswith("linux"):
        pytest.skip("VmHWM and clear_refs come from /proc")
    workdir = tmp_path_factory.mktemp("wide-rows")
    samples = workdir / "samples"
    samples.mkdir()
    async with (
        # one process measured: the batch encoder child is off (it holds a batch of its own)
        embedded_fetcher(
            workdir, ENCODER_PROCESS_ENABLED="false", SQLITE_ALLOWED_DIR=str(samples)
        ) as host,
        httpx.AsyncClient(timeout=60) as http,
    ):
        objects = workdir / "state" / "objects"
        yield Embedded(host, ManagerApi(http, host.base_url), objects, samples)


def _assert_every_row(document: bytes, growth: int, bound: int = GROWTH_BOUND) -> None:
    """All rows are in the document (each ``body`` is ``WIDTH`` characters of hex), and the
    peak grew by less than ``bound``."""
    assert len(document) > ROWS * WIDTH
    assert document.count(b'"body": "') == ROWS
    assert growth < bound, f"peak RSS grew {growth / MIB:.0f} MiB"


async def test_postgresql_wide_rows(embedded: Embedded, databases: DatabaseFactory) -> None:
    source = databases.create(
        "fetcher_e2e_wide",
        f"CREATE TABLE public.wide (id integer, body text); INSERT INTO public.wide "
        f"SELECT g, repeat(md5(g::text), {WIDTH // 32}) FROM generate_series(1, {ROWS}) g;",
    )
    name = f"wide_pg_{secrets.token_hex(3)}"
    await embedded.api.create_connection(
        name, source.name, password="unused", host=source.host, port=source.port
    )
    _assert_every_row(*await embedded.extract(name, "public.wide"))


async def test_mariadb_wide_rows(embedded: Embedded) -> None:
    statements = (
        "CREATE TABLE wide (id INT PRIMARY KEY, body LONGTEXT)",
        f"INSERT INTO wide SELECT seq, REPEAT(MD5(seq), {WIDTH // 32}) FROM seq_1_to_{ROWS}",
    )
    name = f"wide_my_{secrets.token_hex(3)}"
    async with fresh_database(statements) as (database, reader, password):
        await embedded.api.create(mysql_connection(database, reader, password, name))
        _assert_every_row(*await embedded.extract(name, "wide"))


async def test_sqlite_wide_rows(embedded: Embedded) -> None:
    path = embedded.samples / "wide.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE wide (id INTEGER PRIMARY KEY, body TEXT)")
        db.executemany(
            "INSERT INTO wide VALUES (?, ?)",
            ((n, secrets.token_hex(WIDTH // 2)) for n in range(1, ROWS + 1)),
        )
    db.close()
    name = f"wide_sq_{secrets.token_hex(3)}"
    await embedded.api.create({"configName": name, "type": "SQLITE", "databaseName": str(path)})
    _assert_every_row(*await embedded.extract(name, "wide"))


async def test_mongodb_wide_documents(embedded: Embedded) -> None:
    name = f"wide_mg_{secrets.token_hex(3)}"
    async with mongo_database("e2e_wide") as database:
        documents = ({"id": n, "body": secrets.token_hex(WIDTH // 2)} for n in range(ROWS))
        await database["wide"].insert_many(documents)
        await embedded.api.create(mongodb_connection(name, database.name))
        # A MongoDB server's reply holds up to 16 MiB of BSON whatever the batch size asked
        # for; the driver keeps it until it is read, so the bound is the reply's on top.
        _assert_every_row(*await embedded.extract(name, "wide"), bound=GROWTH_BOUND + 32 * MIB)


#: One ``text`` value of this many characters, alone in its row.
HUGE = 60_000_000
#: Rows of megabytes: each alone is wider than a whole batch target.
MEGA_ROWS, MEGA_WIDTH = 16, 8_000_000


async def _pg_table(embedded: Embedded, databases: DatabaseFactory, rows: int, width: int) -> str:
    """A connection to a fresh PostgreSQL table ``public.wide`` of ``rows`` × ``width``."""
    source = databases.create(
        f"fetcher_e2e_wide_{rows}",
        f"CREATE TABLE public.wide (id integer, body text); INSERT INTO public.wide "
        f"SELECT g, repeat(md5(g::text), {width // 32}) FROM generate_series(1, {rows}) g;",
    )
    name = f"wide_pg_{secrets.token_hex(3)}"
    await embedded.api.create_connection(
        name, source.name, password="unused", host=source.host, port=source.port
    )
    return name


async def test_one_huge_value_is_held_a_few_times_only(
    embedded: Embedded, databases: DatabaseFactory
) -> None:
    """A single value is fetched whole: the driver holds it about three times (libpq's input
    buffer and result, the Python string) and the writer once more, encoded. Nothing past that
    makes another whole copy: the document is sealed, encoded and stored a slice at a time
    (it was held about ten times: the encoded bytes cut out of orjson's output, the writer's
    join, the head prepended, the ciphertext, its base64 and the stored part)."""
    name = await _pg_table(embedded, databases, 1, HUGE)
    document, growth = await embedded.extract(name, "public.wide")
    assert document.count(b'"body": "') == 1
    assert len(document) > HUGE
    print(f"one {HUGE / 1e6:.0f} MB value: peak RSS grew {growth / MIB:.0f} MiB")
    assert growth < 5 * HUGE, f"peak RSS grew {growth / MIB:.0f} MiB"


async def test_rows_of_megabytes_come_one_at_a_time(
    embedded: Embedded, databases: DatabaseFactory
) -> None:
    """Before any row is seen, a fetch takes one row: rows of megabytes are never fetched
    several at a time (the first fetch took eight)."""
    name = await _pg_table(embedded, databases, MEGA_ROWS, MEGA_WIDTH)
    document, growth = await embedded.extract(name, "public.wide")
    assert document.count(b'"body": "') == MEGA_ROWS
    print(f"{MEGA_ROWS} rows of {MEGA_WIDTH / 1e6:.0f} MB: peak RSS grew {growth / MIB:.0f} MiB")
    assert growth < 6 * MEGA_WIDTH, f"peak RSS grew {growth / MIB:.0f} MiB"
