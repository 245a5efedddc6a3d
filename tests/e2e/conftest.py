"""End-to-end harness: a real Manager and real Workers (``fetcher run``) against PostgreSQL,
RabbitMQ and the S3 server, observed the way a consumer sees them.

Per session: a fresh metadata database (``metadata_dsn``), a fresh source database with sample
tables, unique work-queue / events-exchange / consumer-queue names, a fresh bucket, one Manager
and the ``pg_src`` connection. Workers are started per test (``launcher.running_worker()``),
because several scenarios need jobs created while no Worker runs. Everything is removed at the
end: processes by PID, queues and the exchange by name, the databases and the bucket.

Every async test and fixture here runs on the session event loop (the event consumer lives on
it); test modules set ``pytestmark = E2E``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import pytest
import pytest_asyncio

from tests.e2e.harness import (
    CE_SOURCE,
    MASTER_KEY,
    PENDING_TIMEOUT_SECONDS,
    Broker,
    ConsumerKeys,
    Database,
    DatabaseFactory,
    EventCollector,
    ManagerApi,
    Names,
    ProcessLauncher,
    ResultStore,
    Stack,
    derive_cli_key,
    take_dead_letters,
)
from tests.services import (
    RABBITMQ_URL,
    S3_ACCESS_KEY,
    S3_ENDPOINT,
    S3_SECRET_KEY,
    fresh_bucket,
    s3_test_client,
    service_missing,
)

E2E = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


SOURCE_CONFIG = "pg_src"
#: A distinctive password: trust auth accepts anything, and the logs must never show it.
SOURCE_PASSWORD = f"e2e-Secret-{secrets.token_hex(6)}"

SOURCE_SCHEMA = """
CREATE SCHEMA ledger;
CREATE TABLE public.accounts (
    id integer PRIMARY KEY,
    email text NOT NULL,
    balance numeric(12, 2),
    active boolean NOT NULL,
    opened_on date,
    created_at timestamptz NOT NULL,
    external_ref uuid,
    score double precision,
    profile jsonb
);
INSERT INTO public.accounts VALUES
 (1, 'ana@example.com', 1500.00, true, '2025-12-31', '2025-12-31 23:59:59.999+00',
  '6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88', 0.5, '{"tier": "gold", "tags": ["a", "b"]}'),
 (2, 'zoë@example.com', -0.50, true, '2026-01-01', '2026-01-01 00:00:00+00',
  NULL, 2.75, NULL),
 (3, 'quote"and\\back@example.com', NULL, false, NULL, '2026-01-15 12:30:00.12+02',
  '0190a1b2-0000-7000-8000-000000000002', NULL, '{}'),
 (4, E'line1\\nline2@example.com', 0.00, true, '2026-01-20', '2026-01-31 23:59:59.5+00',
  NULL, 1.0, '{"nested": {"z": 1, "a": null}}'),
 (5, 'late@example.com', 99999.99, true, '2026-02-01', '2026-02-01 00:00:00+00',
  NULL, -3.25, NULL),
 (6, 'inactive@example.com', 10.10, false, '2026-01-10', '2026-01-10 08:00:00+00',
  NULL, 0.125, NULL);
CREATE TABLE ledger.entries (
    entry_id bigint PRIMARY KEY,
    account_id integer,
    amount numeric(14, 4),
    memo varchar(64),
    booked_at timestamp
);
INSERT INTO ledger.entries VALUES
 (9007199254740993, 1, 12.5000, 'opening', '2026-01-02 03:04:05.12'),
 (2, 2, -7.0001, NULL, '2026-01-03 00:00:00'),
 (3, NULL, NULL, E'tab\\tand ü', NULL);
"""


@pytest.fixture(scope="session")
def databases(metadata_dsn: str) -> Iterator[DatabaseFactory]:
    """Extra databases (the metadata database comes from ``metadata_dsn``)."""
    factory = DatabaseFactory()
    try:
        yield factory
    finally:
        factory.drop_all()


@pytest.fixture(scope="session")
def source_db(databases: DatabaseFactory) -> Database:
    """The datasource: ``public.accounts`` and ``ledger.entries`` with mixed column types."""
    return databases.create("fetcher_e2e_src", SOURCE_SCHEMA)


@pytest.fixture(scope="session")
def metadata_db(metadata_dsn: str) -> Database:
    """The fresh metadata database of this session (``DATABASE_URL``), never a datasource."""
    import psycopg

    return Database(str(psycopg.conninfo.conninfo_to_dict(metadata_dsn)["dbname"]))


@pytest.fixture(scope="session")
def names() -> Names:
    suffix = secrets.token_hex(4)
    return Names(
        work_queue=f"fetcher.e2e.work.{suffix}",
        events_exchange=f"fetcher.e2e.events.{suffix}",
        consumer_queue=f"fetcher.e2e.consumer.{suffix}",
    )


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def broker(names: Names) -> AsyncIterator[Broker]:
    """A consumer queue bound to ``job.*`` on the events exchange, collecting every event.

    At the end the consumer queue, the events exchange and the work queue are deleted (the
    shared ``fetcher.dlx``/``fetcher.dlq`` topology stays: other Fetchers use it)."""
    import aio_pika

    try:
        # heartbeat=0: this session-loop connection lives until the session ends, and the loop
        # does not run during the other packages' tests; with heartbeats the broker drops it
        # after ~2 minutes idle, and this teardown then failed on a closed connection.
        connection = await aio_pika.connect(RABBITMQ_URL, timeout=5, heartbeat=0)
    except Exception as exc:
        service_missing("RabbitMQ", exc)
        raise
    broker = Broker(names, connection, collector=EventCollector())
    try:
        async with broker.channel() as channel:
            queue = await broker.route_events(channel)
            tag = await queue.consume(broker.collector.on_message)
            yield broker
            await queue.cancel(tag)
    finally:
        async with broker.channel() as channel:
            await channel.queue_delete(names.consumer_queue)
            await channel.exchange_delete(names.events_exchange)
            await channel.queue_delete(names.work_queue)
        with contextlib.suppress(aio_pika.exceptions.ChannelNotFoundEntity):
            async with broker.channel() as channel:  # none of ours may stay in the shared DLQ
                await take_dead_letters(channel, names.work_queue)
        await connection.close()


@pytest.fixture(scope="session")
def s3() -> Iterator[Any]:
    """A synchronous boto3 client for inspection (GetObject, ListMultipartUploads)."""
    with s3_test_client() as client:
        yield client


@pytest.fixture(scope="session")
def results(s3: Any) -> Iterator[ResultStore]:
    """A brand-new bucket for the session's result objects; emptied and deleted at the end."""
    with fresh_bucket(s3, "fetcher-e2e") as name:
        yield ResultStore(s3, name)


@pytest.fixture(scope="session")
def base_env(metadata_db: Database, names: Names, results: ResultStore) -> dict[str, str]:
    """The environment every Manager and Worker starts from (nothing inherited but PATH)."""
    amqp = urlsplit(RABBITMQ_URL)
    return {
        "PATH": os.environ.get("PATH", ""),
        "LANG": "C.UTF-8",
        "APP_ENC_KEY": MASTER_KEY,
        "DATABASE_URL": metadata_db.url,
        "RABBITMQ_HOST": amqp.hostname or "127.0.0.1",
        "RABBITMQ_PORT_AMQP": str(amqp.port or 5672),
        "RABBITMQ_DEFAULT_USER": unquote(amqp.username or "guest"),
        "RABBITMQ_DEFAULT_PASS": unquote(amqp.password or "guest"),
        "RABBITMQ_FETCHER_WORK_QUEUE": names.work_queue,
        "RABBITMQ_JOB_EVENTS_EXCHANGE": names.events_exchange,
        "STREAMING_ENABLED": "true",
        "STREAMING_CLOUDEVENTS_SOURCE": CE_SOURCE,
        "OBJECT_STORAGE_ENDPOINT": S3_ENDPOINT,
        "OBJECT_STORAGE_BUCKET": results.bucket,
        "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "OBJECT_STORAGE_SECRET_KEY": S3_SECRET_KEY,
        "OBJECT_STORAGE_USE_PATH_STYLE": "true",
        "READYZ_DRAIN_DELAY_SEC": "1",
        "PENDING_TIMEOUT_SECONDS": str(PENDING_TIMEOUT_SECONDS),
    }


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=15.0) as client:
        yield client


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def launcher(
    base_env: dict[str, str],
    broker: Broker,
    http: httpx.AsyncClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ProcessLauncher]:
    """Starts Fetcher processes; every one still running at the end is stopped by PID
    (before the broker fixture deletes the queues they use)."""
    processes = ProcessLauncher(
        base_env,
        Path(tmp_path_factory.mktemp("fetcher-logs")),
        http,
        secrets=(MASTER_KEY, S3_SECRET_KEY, SOURCE_PASSWORD),
    )
    try:
        yield processes
    finally:
        await processes.stop_all()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def stack(
    launcher: ProcessLauncher,
    broker: Broker,
    source_db: Database,
    results: ResultStore,
    consumer_keys: ConsumerKeys,
) -> Stack:
    """One Manager for the session and the ``pg_src`` connection to the source database."""
    manager = await launcher.manager()
    api = ManagerApi(launcher.http, manager.base_url)
    await api.create_connection(
        SOURCE_CONFIG,
        source_db.name,
        password=SOURCE_PASSWORD,
        host=source_db.host,
        port=source_db.port,
    )
    return Stack(api, manager, launcher, broker, source_db, results, consumer_keys)


@pytest.fixture(scope="session")
def consumer_keys() -> ConsumerKeys:
    """The external and storage keys, as ``fetcher derive-key`` prints them (§6.5)."""
    return ConsumerKeys(external=derive_cli_key("external"), storage=derive_cli_key("storage"))
