"""One job across PostgreSQL, MariaDB and MongoDB (issue 13): the Manager live-tests the three
connections, the Worker reads them in parallel, and one encrypted document holds three
datasource keys whose rows equal what each source returns to a direct query.

The MariaDB database (with a reader that has a password) and the MongoDB database (the
nx-27017 wire server has no authentication, so the connection carries no credentials, §2.5)
are created for this module and dropped at its end.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest_asyncio

from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    PRODUCT,
    Stack,
    decrypt_result_object,
    encode_rows,
    hmac_hex,
    unique,
)
from tests.services import (
    MARIADB,
    mongo_database,
    mongodb_connection,
    mysql_connection,
    service_missing,
)

pytestmark = E2E

MYSQL_CONFIG = "my_src"
MONGO_CONFIG = "mongo_src"
#: Rows of ``orders`` on MariaDB: id, customer, total (exact decimal), placed_at (DATETIME,
#: naive, taken as UTC), status (ENUM).
ORDERS = [
    (1, "ana", Decimal("10.50"), datetime(2026, 1, 2, 3, 4, 5, 120000), "paid"),
    (2, "bo", Decimal("-0.01"), datetime(2026, 1, 3), "open"),
    (3, "zoë", None, None, "void"),
    (4, 'quote\'d "x"', Decimal("99999.99"), datetime(2026, 2, 1, 23, 59, 59), "paid"),
]
#: Documents of ``events`` on MongoDB (``kind`` is missing from one: projected as null).
EVENTS: list[dict[str, Any]] = [
    {"_id": 1, "kind": "login", "at": datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC), "n": 3},
    {"_id": 2, "kind": "logout", "at": datetime(2026, 1, 3, tzinfo=UTC), "n": 1.5},
    {"_id": 3, "at": datetime(2026, 1, 4, 12, tzinfo=UTC), "n": None, "nested": {"a": [1, 2]}},
]


@dataclass(frozen=True)
class MariadbSource:
    database: str
    reader: str
    password: str


@dataclass(frozen=True)
class MongoSource:
    database: str


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


async def _mariadb_admin() -> Any:
    import asyncmy

    try:
        conn = await asyncmy.connect(
            host=MARIADB["host"],
            port=MARIADB["port"],
            user=MARIADB["user"],
            password=MARIADB["password"],
            autocommit=True,
        )
    except (asyncmy.errors.MySQLError, OSError) as exc:
        service_missing("MariaDB", exc)
        raise
    return conn


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mariadb_source() -> AsyncIterator[MariadbSource]:
    source = MariadbSource(
        f"e2e_my_{secrets.token_hex(4)}", f"e2e_rd_{secrets.token_hex(4)}", secrets.token_hex(8)
    )
    conn = await _mariadb_admin()
    db = _quote(source.database)
    try:
        async with conn.cursor() as cur:
            await cur.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
            await cur.execute(
                f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, customer VARCHAR(64),"
                " total DECIMAL(10, 2), placed_at DATETIME(6),"
                " status ENUM('open', 'paid', 'void'))"
            )
            await cur.executemany(f"INSERT INTO {db}.orders VALUES (%s, %s, %s, %s, %s)", ORDERS)
            await cur.execute(
                "CREATE USER %s@'%%' IDENTIFIED BY %s", (source.reader, source.password)
            )
            await cur.execute(f"GRANT SELECT ON {db}.* TO %s@'%%'", (source.reader,))
        yield source
    finally:
        async with conn.cursor() as cur:
            await cur.execute(f"DROP DATABASE IF EXISTS {db}")
            await cur.execute("DROP USER IF EXISTS %s@'%%'", (source.reader,))
        conn.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mongo_source() -> AsyncIterator[MongoSource]:
    async with mongo_database("e2e_mg") as database:
        await database["events"].insert_many([dict(e) for e in EVENTS])
        yield MongoSource(database.name)


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += "." + f"{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def _expected_orders() -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "customer": customer,
            "total": None if total is None else format(total, "f"),
            "placed_at": _iso(None if placed is None else placed.replace(tzinfo=UTC)),
            "status": status,
        }
        for i, customer, total, placed, status in ORDERS
    ]


def _expected_events() -> list[dict[str, Any]]:
    return [
        {"_id": e["_id"], "kind": e.get("kind"), "at": _iso(e["at"]), "n": e["n"]} for e in EVENTS
    ]


async def test_one_job_reads_postgresql_mariadb_and_mongodb(
    stack: Stack, mariadb_source: MariadbSource, mongo_source: MongoSource
) -> None:
    """Three datasource keys in one document, each equal, row by row, to its source."""
    await stack.api.create(
        mysql_connection(
            mariadb_source.database, mariadb_source.reader, mariadb_source.password, MYSQL_CONFIG
        ),
    )
    await stack.api.create(mongodb_connection(MONGO_CONFIG, mongo_source.database))
    mapped = {
        SOURCE_CONFIG: {"public.accounts": ["id", "email", "balance", "created_at"]},
        MYSQL_CONFIG: {"orders": ["id", "customer", "total", "placed_at", "status"]},
        MONGO_CONFIG: {"events": ["_id", "kind", "at", "n"]},
    }
    async with stack.launcher.running_worker():
        job_id = await stack.api.submit(
            mapped, metadata={"source": PRODUCT, "correlationId": unique("three")}
        )
        event = await stack.broker.collector.wait_for(job_id, "job.completed")
        job = await stack.api.wait_terminal(job_id)

    assert job["status"] == "completed", job
    result = event.payload["result"]
    plaintext = decrypt_result_object(stack.keys.storage, stack.results.read(result["path"]))
    assert hmac_hex(stack.keys.external, plaintext) == result["hmac"]
    document = json.loads(plaintext)
    assert sorted(document) == sorted([SOURCE_CONFIG, MYSQL_CONFIG, MONGO_CONFIG])

    columns, rows = stack.source.query(
        "SELECT id, email, balance, created_at FROM public.accounts ORDER BY id"
    )
    assert sorted(document[SOURCE_CONFIG]["accounts"], key=lambda r: r["id"]) == encode_rows(
        columns, rows
    )
    assert sorted(document[MYSQL_CONFIG]["orders"], key=lambda r: r["id"]) == _expected_orders()
    assert sorted(document[MONGO_CONFIG]["events"], key=lambda r: r["_id"]) == _expected_events()
    total = len(rows) + len(ORDERS) + len(EVENTS)
    assert result["row_count"] == total
    assert mariadb_source.password not in plaintext.decode()
