"""MongoDB under the contract suite, on the nx-27017 wire server (``scripts/mongo-server.sh``).

Modelling: the dataset's key column (``id``, and ``n`` of ``contract_bulk``) is the document's
``_id`` — the catalog spelling of a primary key on MongoDB — so every other top-level key is a
dataset column; a NULL is stored as an explicit BSON null.

The server's gaps shape ``families``: nx-27017 cannot store Decimal128, returns UUID binaries as
plain bytes and has no date-only, time or zone-less timestamp type (MongoDB has none either), and
it has no views; those families and the view are left out here (the encodings are covered by
``tests/unit/mongodb``; ``mongodb_real.py`` runs them on a real server when one is given). It has
no authentication, so the reader connects without credentials (§2.5) and there is no
wrong-password case.

Observation without a second session: nx-27017 has no ``currentOp`` or ``serverStatus``
metrics, so the cursor and the connections are watched through pymongo's global command and
pool listeners, registered before any client of the suite is built: ``assert_streaming`` checks
that the server returned fewer documents than the collection holds and kept the cursor open;
``open_sessions`` counts the connection pools the connector's clients hold to the test server.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from datetime import datetime
from typing import Any, ClassVar

from bson.binary import Binary
from bson.int64 import Int64
from pymongo import AsyncMongoClient, monitoring

from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.engine import ConnectionDescriptor, ConnectorRegistry
from fetcher.engine.types import EngineType, TypeFamily
from tests.contract.dataset import (
    BULK,
    BULK_PAD,
    BULK_ROWS,
    INJECTION_COLUMN,
    INJECTION_TABLE,
    Collation,
    ColumnSpec,
    Dataset,
)
from tests.contract.engines import LoadedDataset
from tests.contract.engines._common import closed_port, default_expected
from tests.services import MONGODB_HOST, MONGODB_PORT, service_missing

#: Dataset key columns stored as ``_id``.
_KEY_COLUMNS = frozenset({"id", "n"})
#: nx-27017 keeps each collection in a SQLite table and accepts only ``[A-Za-z0-9_]`` names,
#: so the injection-shaped table gets a plain name here (its column keeps the hostile name).
#: MongoDB itself passes a collection name as a BSON string, never as query text, and
#: ``mongodb_real.py`` keeps the hostile collection name.
_NX_INJECTION_TABLE = "contract_injection"
#: nx-27017 splices field names into SQLite JSON paths, so a quote in a filtered field name
#: breaks its own SQL (a server bug: the query document the connector sends is exact). The
#: quotes become ``_`` here; the rest of the hostile name (``;``, ``--``, `````, ``]``, ``%s``)
#: stays.
_NX_INJECTION_COLUMN = INJECTION_COLUMN.replace('"', "_").replace("'", "_")


class _Watcher(monitoring.CommandListener, monitoring.ConnectionPoolListener):
    """Counts documents the server returned per cursor, and live connection pools per port."""

    def __init__(self) -> None:
        self.returned: dict[int, int] = {}
        self.open_cursors: set[int] = set()
        self.pools: dict[tuple[str, int], int] = {}

    # -- commands --
    def started(self, event: Any) -> None:
        return None

    def succeeded(self, event: Any) -> None:
        cursor = event.reply.get("cursor") if isinstance(event.reply, dict) else None
        if event.command_name not in ("find", "getMore") or not isinstance(cursor, dict):
            return
        batch = cursor.get("firstBatch", cursor.get("nextBatch")) or []
        cursor_id = int(cursor.get("id", 0))
        key = int(event.request_id) if cursor_id == 0 else cursor_id
        self.returned[key] = self.returned.get(key, 0) + len(batch)
        if cursor_id:
            self.open_cursors.add(cursor_id)

    def failed(self, event: Any) -> None:
        return None

    # -- pools --
    def pool_created(self, event: Any) -> None:
        self.pools[event.address] = self.pools.get(event.address, 0) + 1

    def pool_closed(self, event: Any) -> None:
        self.pools[event.address] = self.pools.get(event.address, 0) - 1

    def pool_ready(self, event: Any) -> None:
        return None

    def pool_cleared(self, event: Any) -> None:
        return None

    def connection_created(self, event: Any) -> None:
        return None

    def connection_ready(self, event: Any) -> None:
        return None

    def connection_closed(self, event: Any) -> None:
        return None

    def connection_check_out_started(self, event: Any) -> None:
        return None

    def connection_check_out_failed(self, event: Any) -> None:
        return None

    def connection_checked_out(self, event: Any) -> None:
        return None

    def connection_checked_in(self, event: Any) -> None:
        return None


WATCHER = _Watcher()
monitoring.register(WATCHER)


def stored_value(value: object) -> object:
    """A canonical dataset value as BSON: bytes as generic binary, big ints as int64."""
    if isinstance(value, bytes):
        return Binary(value, 0)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**31:
        return Int64(value)
    return value


class MongoEngine:
    name = "mongodb"
    families = frozenset(
        {
            TypeFamily.INTEGER,
            TypeFamily.FLOAT,
            TypeFamily.BOOLEAN,
            TypeFamily.TEXT,
            TypeFamily.TIMESTAMPTZ,
            TypeFamily.JSON,
            TypeFamily.BYTES,
        }
    )
    has_views = False
    case_insensitive_names = False
    #: ``$eq`` is exact; LIKE is a case-insensitive regex (§3.4).
    collation = Collation(eq_case_insensitive=False, like_case_insensitive=True)
    adjust = None
    host = MONGODB_HOST
    port = MONGODB_PORT

    #: A ``system.*`` collection discovery must skip (§11.3); nx-27017 cannot hold a dotted
    #: collection name, so only ``mongodb_real.py`` creates one.
    system_collection: str | None = None
    #: Collection names the server cannot hold, mapped to ones it can.
    renamed: ClassVar[dict[str, str]] = {
        INJECTION_TABLE: _NX_INJECTION_TABLE,
        INJECTION_COLUMN: _NX_INJECTION_COLUMN,
    }

    def stored(self, value: object) -> object:
        """A canonical value as the BSON value this server can hold."""
        return stored_value(value)

    def catalog_name(self, name: str) -> str:
        if name in _KEY_COLUMNS:
            return "_id"
        return self.renamed.get(name, name)

    def expected(self, column: ColumnSpec, value: object) -> object:
        if isinstance(value, datetime):
            # BSON datetimes hold milliseconds; the dataset's instants are whole milliseconds.
            value = value.replace(microsecond=value.microsecond // 1000 * 1000)
        return default_expected(column, value)

    def admin_client(self) -> AsyncMongoClient[dict[str, Any]]:
        return AsyncMongoClient(
            host=self.host, port=self.port, directConnection=True, serverSelectionTimeoutMS=3000
        )

    def descriptor(self, database: str) -> ConnectionDescriptor:
        return ConnectionDescriptor(
            config_name="contract",
            type=EngineType.MONGODB,
            host=self.host,
            port=self.port,
            database=database,
        )

    async def load(self, dataset: Dataset) -> LoadedDataset:
        client = self.admin_client()
        try:
            await client.admin.command("ping")
        except Exception as exc:
            await client.close()
            service_missing("MongoDB (scripts/mongo-server.sh start)", exc)
            raise
        database = f"contract_{secrets.token_hex(4)}"
        try:
            await self._populate(client, database, dataset)
        finally:
            await client.close()
        descriptor = self.descriptor(database)
        return LoadedDataset(
            descriptor=descriptor,
            default_schema=None,
            dataset=dataset,
            hidden_tables=(self.system_collection,) if self.system_collection else (),
            wrong_password=None,
            unreachable=replace(descriptor, port=closed_port()),
            secrets=(),
            state={"database": database},
        )

    async def _populate(
        self, client: AsyncMongoClient[dict[str, Any]], database: str, dataset: Dataset
    ) -> None:
        db = client[database]
        for table in dataset.tables:
            if table.is_view:
                continue
            name = self.catalog_name(table.name)
            await db.create_collection(name)
            if table.rows:
                docs = [
                    {self.catalog_name(c.name): self.stored(row[c.name]) for c in table.columns}
                    for row in table.rows
                ]
                await db[name].insert_many(docs)
        bulk = [{"_id": n, "pad": "x" * BULK_PAD} for n in range(1, BULK_ROWS + 1)]
        await db[BULK].insert_many(bulk)
        if self.system_collection:
            await db[self.system_collection].insert_one({"_id": 1, "hidden": True})

    async def unload(self, loaded: LoadedDataset) -> None:
        client = self.admin_client()
        try:
            await client.drop_database(str(loaded.state["database"]))
        finally:
            await client.close()

    def registry(self, loaded: LoadedDataset, batch_size: int) -> ConnectorRegistry:
        return SqlConnectorRegistry(batch_size=batch_size)

    async def assert_streaming(self, loaded: LoadedDataset) -> None:
        """The reader's ``find`` cursor is still open on the server and has returned fewer
        documents than ``contract_bulk`` holds: the driver did not fetch everything."""
        live = [c for c in WATCHER.open_cursors if c in WATCHER.returned]
        assert live, "no open server cursor"
        latest = max(live, key=lambda c: WATCHER.returned[c])
        assert 0 < WATCHER.returned[latest] < BULK_ROWS

    async def open_sessions(self, loaded: LoadedDataset) -> int | None:
        """Connection pools to the test server that the suite's connectors hold open."""
        return sum(n for (host, port), n in WATCHER.pools.items() if port == self.port)


ENGINE = MongoEngine()
