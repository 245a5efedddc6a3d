"""A Worker-side world with no servers: SQLite store, fake datasources, local object store."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from fetcher.adapters.messaging.inprocess import InProcessWorkQueue
from fetcher.adapters.objectstore.local import LocalObjectStore
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.bootstrap import Messaging, assemble_runtime
from fetcher.crypto import KeySet
from fetcher.engine.testing import FakeDatabase, FakeRegistry
from fetcher.engine.types import Column, TableSchema, TypeFamily
from fetcher.services.events.outbox import OutboxRelay
from fetcher.services.jobs.extraction import ExtractionService
from fetcher.services.jobs.reaper import StaleJobReaper
from fetcher.services.jobs.service import JobService
from fetcher.services.jobs.work_handler import WorkHandler
from fetcher.services.principal import ANONYMOUS
from fetcher.services.records import ConnectionRecord
from fetcher.services.testing import RecordingPublisher
from fetcher.services.timeutil import SystemClock, new_id
from fetcher.settings import Settings
from fetcher.worker.main import work_handler

MASTER = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
QUEUE = "fetcher.embedded.work"  # the work queue name of an embedded runtime
EXCHANGE = "fetcher.job.events"
ACCOUNTS = TableSchema(
    "public",
    "accounts",
    (
        Column("id", TypeFamily.INTEGER),
        Column("email", TypeFamily.TEXT),
        Column("balance", TypeFamily.DECIMAL),
    ),
)


@dataclass
class FakeDelivery:
    body: bytes
    headers: dict[str, object]
    exchange: str = ""
    routing_key: str = QUEUE
    outcome: str | None = None

    async def ack(self) -> None:
        assert self.outcome is None
        self.outcome = "ack"

    async def reject(self) -> None:
        assert self.outcome is None
        self.outcome = "reject"


@dataclass
class World:
    store: SqliteMetadataStore
    keys: KeySet
    database: FakeDatabase
    objects: LocalObjectStore
    publisher: RecordingPublisher
    jobs: JobService
    extraction: ExtractionService
    handler: WorkHandler
    relay: OutboxRelay
    reaper: StaleJobReaper
    connection: ConnectionRecord

    def delivery(self, index: int = -1) -> FakeDelivery:
        body, headers = self.publisher.work[index]
        return FakeDelivery(body, dict(headers))

    async def submit(self, mapped: Mapping[str, object], **extra: object) -> str:
        body = {
            "dataRequest": {"mappedFields": mapped, **extra},
            "metadata": {"source": "payments"},
        }
        response, created = await self.jobs.create(
            json.loads(json.dumps(body)), request_id="r-1", principal=ANONYMOUS
        )
        assert created
        return str(response["jobId"])


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    store = SqliteMetadataStore(str(tmp_path / "meta.db"))
    await store.open()
    await store.migrate()
    database = FakeDatabase()
    database.add(
        ACCOUNTS,
        [
            {"id": 1, "email": "a@example.com", "balance": "10.50"},
            {"id": 2, "email": "b@example.com", "balance": "0.00"},
        ],
    )
    publisher = RecordingPublisher()
    objects = LocalObjectStore(str(tmp_path / "objects"))
    settings = Settings.from_env(
        {
            "FETCHER_MODE": "embedded",
            "APP_ENC_KEY": MASTER,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'meta.db'}",
            "STREAMING_CLOUDEVENTS_SOURCE": "//lerian.fetcher/test",
        }
    )
    runtime = assemble_runtime(  # the composition bootstrap uses, over fakes
        settings,
        store=store,
        registry=FakeRegistry({"pg": database}),
        messaging=Messaging(publisher, InProcessWorkQueue(QUEUE), publisher),
        objects=objects,
    )
    assert runtime.worker is not None
    keys, cipher = settings.keys, runtime.connections.editor.cipher
    jobs, extraction = runtime.jobs, runtime.worker.extraction
    relay, reaper = runtime.worker.relay, runtime.worker.reaper
    handler = work_handler(runtime)
    handler.retry_base_seconds = 0.0
    now = SystemClock().now()
    connection_id = new_id()
    connection = ConnectionRecord(
        id=connection_id,
        config_name="pg",
        type="POSTGRESQL",
        database_name="ledger",
        host="db.internal.example",
        port=5432,
        user_name="reader",
        password_encrypted=cipher.encrypt("sentinel-Pa55word", connection_id),
        product_name="payments",
        created_at=now,
        updated_at=now,
    )
    await store.insert_connection(connection)
    try:
        yield World(
            store,
            keys,
            database,
            objects,
            publisher,
            jobs,
            extraction,
            handler,
            relay,
            reaper,
            connection,
        )
    finally:
        await store.close()
