"""MongoDB under the contract suite on a REAL server, gated on ``FETCHER_TEST_MONGODB_URL``
(``mongodb://admin:pw@host:port/``; test configuration only — the connector never gets a URI).

Everything the nx-27017 plugin (``mongodb.py``) leaves out runs here: Decimal128 and UUID
columns, the hostile collection and field names verbatim, a view, a ``system.*`` collection
that discovery must skip, and a reader with a password (``authSource`` = the fresh database),
so the wrong-password case runs too.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import replace
from decimal import Decimal
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit
from uuid import UUID

import pytest
from bson.binary import Binary
from bson.decimal128 import Decimal128
from pymongo import AsyncMongoClient

from fetcher.engine.types import TypeFamily
from tests.contract.dataset import VIEW, Dataset
from tests.contract.engines import LoadedDataset
from tests.contract.engines.mongodb import MongoEngine, stored_value

URL_VARIABLE = "FETCHER_TEST_MONGODB_URL"


def _real_value(value: object) -> object:
    if isinstance(value, Decimal):
        return Decimal128(value)
    if isinstance(value, UUID):
        return Binary(value.bytes, 4)
    return stored_value(value)


class RealMongoEngine(MongoEngine):
    name = "mongodb-real"
    families = MongoEngine.families | {TypeFamily.DECIMAL, TypeFamily.UUID}
    has_views = True
    system_collection: str | None = "system.js"
    renamed: ClassVar[dict[str, str]] = {}

    def stored(self, value: object) -> object:
        return _real_value(value)

    def _url(self) -> str:
        url = os.environ.get(URL_VARIABLE)
        if not url:
            pytest.skip(f"{URL_VARIABLE} is not set (no real MongoDB to run against)")
        return url

    def admin_client(self) -> AsyncMongoClient[dict[str, Any]]:
        parts = urlsplit(self._url())
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 27017
        return AsyncMongoClient(
            host=self.host,
            port=self.port,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            directConnection=True,
            serverSelectionTimeoutMS=5000,
        )

    async def load(self, dataset: Dataset) -> LoadedDataset:
        loaded = await super().load(dataset)
        database = str(loaded.state["database"])
        password = f"pw'{secrets.token_hex(8)}\"%;"
        client = self.admin_client()
        try:
            db = client[database]
            await db.command(
                "createUser", "reader", pwd=password, roles=[{"role": "read", "db": database}]
            )
            if dataset.view is not None:
                fields = {self.catalog_name(c.name): 1 for c in dataset.view.columns}
                await db.command(
                    "create", VIEW, viewOn="contract_items", pipeline=[{"$project": fields}]
                )
        finally:
            await client.close()
        descriptor = replace(
            loaded.descriptor,
            username="reader",
            password=password,
            metadata={"authSource": database},
        )
        return replace(
            loaded,
            descriptor=descriptor,
            wrong_password=replace(descriptor, password="Wrong-" + password),
            unreachable=replace(loaded.unreachable or descriptor, password=password),
            secrets=(password,),
        )

    async def unload(self, loaded: LoadedDataset) -> None:
        client = self.admin_client()
        try:
            await client[str(loaded.state["database"])].command("dropUser", "reader")
        finally:
            await client.close()
        await super().unload(loaded)


ENGINE = RealMongoEngine()
