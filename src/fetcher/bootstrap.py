"""The one composition root: ``async with build_runtime(settings) as rt:``.

It is the only place that reads :class:`~fetcher.settings.Settings` and builds real objects:
stores, connectors, object storage and messaging are opened in an ``AsyncExitStack`` and handed
to the services as ports. Tests build a :class:`Runtime` from fakes with the same fields.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pybase64

from fetcher.adapters.encoder_process import BatchEncoder
from fetcher.adapters.messaging.inprocess import InProcessEventBus, InProcessWorkQueue
from fetcher.adapters.objectstore.local import LocalObjectStore
from fetcher.adapters.spool import EncryptedSpoolFactory
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.adapters.store.postgres import PostgresMetadataStore
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.crypto import Redactor
from fetcher.engine import DEFAULT_LIMITS, ConnectionDescriptor, ConnectorRegistry, Engine, Limits
from fetcher.services.connections import ConnectionService
from fetcher.services.credentials import CredentialCipher
from fetcher.services.events import EventContext
from fetcher.services.extraction import ExtractionService
from fetcher.services.feed import EventFeed
from fetcher.services.job_cursor import CursorCodec, cursor_key
from fetcher.services.job_list import JobListService
from fetcher.services.jobs import JobService
from fetcher.services.metrics import Metrics
from fetcher.services.name_collisions import log_name_collisions
from fetcher.services.outbox import OutboxRelay
from fetcher.services.ports import MetadataStore
from fetcher.services.reaper import StaleJobReaper
from fetcher.services.runtime_ports import EventPublisher, ObjectStore, WorkPublisher, WorkSource
from fetcher.services.schema_cache import SchemaCache
from fetcher.settings import Mode, Settings

__all__ = [
    "Lifecycle",
    "Messaging",
    "ReadinessCheck",
    "Runtime",
    "WorkerParts",
    "assemble_runtime",
    "build_runtime",
]

#: A readiness probe (§2.10): returns normally when up, raises with a reason when down.
ReadinessCheck = Callable[[], Awaitable[None]]


@dataclass
class Lifecycle:
    """``started`` turns ``/health`` 200 (§2.10); ``draining`` turns ``/readyz`` 503 (§9.3)."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    draining: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Runtime:
    """Everything a host needs, typed. ``readiness`` maps a check name to its probe; a name
    mapped to ``None`` is reported ``skipped`` (embedded mode without a broker)."""

    settings: Settings
    store: MetadataStore
    registry: ConnectorRegistry
    connections: ConnectionService
    jobs: JobService
    metrics: Metrics
    readiness: Mapping[str, ReadinessCheck | None]
    internal: Mapping[str, ConnectionDescriptor] = field(default_factory=dict)
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    worker: WorkerParts | None = None
    #: ``GET /v1/fetcher`` (issue 21); ``None`` over a store without job search (test fakes).
    job_list: JobListService | None = None
    #: The §2.12 event feed over ``store``; the relay calls ``feed.notify()`` after it assigns
    #: ``feed_seq`` values, waking long-polls at once.
    feed: EventFeed = field(init=False)

    def __post_init__(self) -> None:
        self.feed = EventFeed(self.store)


@dataclass
class WorkerParts:
    """What runs the Worker side (Worker and embedded modes). ``republisher`` carries §7.4
    row 7 retries back to the work queue."""

    extraction: ExtractionService
    relay: OutboxRelay
    reaper: StaleJobReaper
    source: WorkSource
    republisher: WorkPublisher
    objects: ObjectStore


@dataclass
class Messaging:
    """The messaging ports of one runtime. ``work_source`` and ``events`` are needed only
    where a Worker side runs; ``check`` is the broker readiness probe (``None``: skipped)."""

    work_publisher: WorkPublisher
    work_source: WorkSource | None = None
    events: EventPublisher | None = None
    check: ReadinessCheck | None = None


@asynccontextmanager
async def build_runtime(
    settings: Settings,
    *,
    registry: ConnectorRegistry | None = None,
    lifecycle: Lifecycle | None = None,
) -> AsyncIterator[Runtime]:
    """Open every resource the mode needs; close them all, in reverse, on exit."""
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(_open_store(settings))
        await store.migrate()
        await log_name_collisions(
            store,
            list(settings.internal_datasources),
            settings.internal_tenants,
            multi_tenant=settings.multi_tenant,
        )
        messaging = await _open_messaging(settings, stack)
        objects = (
            await _open_objects(settings, stack) if settings.mode is not Mode.MANAGER else None
        )
        yield assemble_runtime(
            settings,
            store=store,
            registry=registry
            or SqlConnectorRegistry(
                sqlite_allowed_dir=settings.sqlite_allowed_dir,
                forbidden_paths=[p for p in (settings.sqlite_path,) if p],
                encoder=_batch_encoder(settings, stack),
            ),
            messaging=messaging,
            objects=objects,
            lifecycle=lifecycle,
        )


def assemble_runtime(
    settings: Settings,
    *,
    store: MetadataStore,
    registry: ConnectorRegistry,
    messaging: Messaging,
    objects: ObjectStore | None = None,
    lifecycle: Lifecycle | None = None,
) -> Runtime:
    """Wire the services over already-open ports. :func:`build_runtime` calls it with real
    adapters; tests call it with fakes, so both run the same composition."""
    metrics = Metrics()
    internal = dict(settings.internal_datasources)
    cipher = CredentialCipher(settings.key_version, settings.keys, settings.previous_keys)
    events = EventContext(source=settings.ce_source, exchange=settings.events_exchange)
    max_limits = DEFAULT_LIMITS.with_result_ceiling(settings.engine_max_result_bytes)
    connections = _connection_service(settings, store, registry, cipher, internal)
    jobs = _job_service(
        settings,
        store,
        connections=connections,
        messaging=messaging,
        events=events,
        metrics=metrics,
        max_limits=max_limits,
    )
    readiness: dict[str, ReadinessCheck | None] = {
        "database": store.ping,
        "rabbitmq": messaging.check,
    }
    worker = None
    source, published = messaging.work_source, messaging.events
    if objects is not None and source is not None and published is not None:
        readiness["object_storage"] = objects.check
        worker = _worker_parts(
            settings=settings,
            store=store,
            registry=registry,
            objects=objects,
            messages=(source, published, messaging.work_publisher),
            shared=(cipher, events, metrics, max_limits),
        )
        worker.extraction.internal = internal
        worker.extraction.internal_tenants = settings.internal_tenants
    runtime = Runtime(
        settings=settings,
        store=store,
        registry=registry,
        connections=connections,
        jobs=jobs,
        job_list=_job_list_service(settings, store, connections),
        metrics=metrics,
        readiness=readiness,
        internal=internal,
        worker=worker,
        lifecycle=lifecycle or Lifecycle(),
    )
    if worker is not None:
        _wake_on_commit(worker, runtime.feed)
    return runtime


def _connection_service(
    settings: Settings,
    store: MetadataStore,
    registry: ConnectorRegistry,
    cipher: CredentialCipher,
    internal: Mapping[str, ConnectionDescriptor],
) -> ConnectionService:
    return ConnectionService(
        store=store,
        cipher=cipher,
        registry=registry,
        internal=internal,
        internal_tenants=settings.internal_tenants,
        embedded=settings.mode is Mode.EMBEDDED,
        sqlite_allowed_dir=settings.sqlite_allowed_dir,
        metadata_store_path=settings.sqlite_path,
        ssrf_guard=settings.ssrf_guard,
        schema_cache=SchemaCache(settings.schema_cache_ttl),
        redactor=Redactor(secrets=settings.secrets),
    )


def _job_service(
    settings: Settings,
    store: MetadataStore,
    *,
    connections: ConnectionService,
    messaging: Messaging,
    events: EventContext,
    metrics: Metrics,
    max_limits: Limits,
) -> JobService:
    return JobService(
        store=store,
        connections=connections,
        publisher=messaging.work_publisher,
        internal_key=settings.keys.internal_hmac,
        work_queue=_work_queue(settings),
        events=events,
        max_limits=max_limits,
        metrics=metrics,
    )


def _job_list_service(
    settings: Settings, store: MetadataStore, connections: ConnectionService
) -> JobListService | None:
    """The job list over the store's own search queries (``adapters/store/job_search.py``)."""
    if not isinstance(store, PostgresMetadataStore | SqliteMetadataStore):
        return None
    codec = CursorCodec(cursor_key(settings.keys.internal_hmac))
    return JobListService(search=store.job_search(), connections=connections, cursors=codec)


def _wake_on_commit(worker: WorkerParts, feed: EventFeed) -> None:
    """A committed terminal transition wakes the outbox relay and the feed's long-polls."""
    relay = worker.relay

    def committed() -> None:
        relay.kick()
        feed.notify()

    worker.extraction.on_commit = committed


def _work_queue(settings: Settings) -> str:
    return settings.rabbitmq.work_queue if settings.rabbitmq else "fetcher.embedded.work"


def _ensure_dir(path: str) -> str:
    from fetcher.adapters.objectstore.local import make_private_dirs

    make_private_dirs(Path(path))  # §13 "Files": directories the process creates are 0700
    return path


def _batch_encoder(settings: Settings, stack: AsyncExitStack) -> BatchEncoder | None:
    """The second process that encodes result batches (issue 12, ``ENCODER_PROCESS_ENABLED``),
    started by the first PostgreSQL stream and stopped with the runtime. On by default in
    embedded mode, where one process serves every role: extraction gets the second core (1.2x
    faster jobs, bench/README.md "Fifth look"). Off by default in the Worker, measured here with
    the S3 server on the same two cores; a Worker with cores of its own may turn it on. The
    Manager extracts nothing."""
    if not settings.encoder_process or settings.mode is Mode.MANAGER:
        return None
    return stack.enter_context(BatchEncoder())


def _open_store(settings: Settings) -> AbstractAsyncContextManager[MetadataStore]:
    if settings.sqlite_path is not None:  # the store creates its file 0600, its directory 0700
        return SqliteMetadataStore(settings.sqlite_path)
    # §2.3 FET-0003: the Manager answers 503 within ~1 s when the store is unreachable.
    checkout = 1.0 if settings.mode is Mode.MANAGER else None
    return PostgresMetadataStore(_libpq_url(settings.database_url), checkout_timeout=checkout)


def _libpq_url(url: str) -> str:
    """libpq accepts ``postgresql://`` and ``postgres://`` as they are."""
    return url


async def _open_objects(settings: Settings, stack: AsyncExitStack) -> ObjectStore:
    storage = settings.object_storage
    if storage.endpoint is None:
        return LocalObjectStore(_ensure_dir(storage.local_dir))
    from fetcher.adapters.objectstore.s3 import MIN_PART_SIZE, S3ObjectStore

    s3 = S3ObjectStore(
        part_size=MIN_PART_SIZE,  # the smallest part S3 accepts keeps the Worker's memory low
        endpoint=storage.endpoint,
        bucket=storage.bucket,
        region=storage.region,
        access_key_id=storage.access_key_id,
        secret_key=storage.secret_key,
        path_style=storage.path_style,
    )
    return await stack.enter_async_context(s3)


async def _open_messaging(settings: Settings, stack: AsyncExitStack) -> Messaging:
    """Embedded without a broker: the in-process queue and bus. Otherwise RabbitMQ."""
    if settings.rabbitmq is None:
        queue = InProcessWorkQueue(_work_queue(settings))
        bus = InProcessEventBus()
        return Messaging(queue, queue, bus, None)
    from fetcher.adapters.messaging import rabbitmq

    rabbit = settings.rabbitmq
    connection = await stack.enter_async_context(
        rabbitmq.RabbitConnection(
            host=rabbit.host,
            port=rabbit.port,
            user=rabbit.user,
            password=rabbit.password,
            vhost=rabbit.vhost,
            tls=rabbit.tls,
        )
    )
    await connection.declare_topology(rabbit.work_queue)  # §7.1, idempotent
    publisher: WorkPublisher = rabbitmq.RabbitWorkPublisher(connection, rabbit.work_queue)
    if settings.mode is Mode.MANAGER:  # the Manager publishes work only (§8.6)
        return Messaging(publisher, check=connection.check)
    await connection.declare_events_exchange(settings.events_exchange)
    events = rabbitmq.RabbitEventPublisher(connection, settings.events_exchange)
    source: WorkSource
    if settings.mode is Mode.EMBEDDED:  # embedded keeps its work in process (§1.1)
        queue = InProcessWorkQueue(_work_queue(settings))
        publisher, source = queue, queue
    else:
        source = rabbitmq.RabbitWorkSource(connection, rabbit.work_queue, prefetch=settings.workers)
    return Messaging(publisher, source, events, connection.check)


def _worker_parts(
    *,
    settings: Settings,
    store: MetadataStore,
    registry: ConnectorRegistry,
    objects: ObjectStore,
    messages: tuple[WorkSource, EventPublisher, WorkPublisher],
    shared: tuple[CredentialCipher, EventContext, Metrics, Limits],
) -> WorkerParts:
    """The Worker's services. ``messages`` is (work source, event publisher, work
    re-publisher); ``shared`` the parts the front services use too."""
    source, publisher, republisher = messages
    cipher, events, metrics, max_limits = shared
    relay = OutboxRelay(
        store=store,
        publisher=publisher,
        keys=settings.keys,
        exchange=settings.events_exchange,
        metrics=metrics,
    )
    engine = Engine(
        registry, limits=max_limits, spools=EncryptedSpoolFactory(settings.spool_memory_bytes)
    )
    extraction = ExtractionService(
        store=store,
        objects=objects,
        engine=engine,
        keys=settings.keys,
        cipher=cipher,
        events=events,
        metrics=metrics,
        key_prefix=settings.object_storage.key_prefix,
        storage_timeout=settings.storage_timeout,
        redactor=Redactor(secrets=settings.secrets),
        on_commit=relay.kick,
        ssrf_guard=settings.ssrf_guard,
        b64encode=pybase64.b64encode,  # SIMD, the standard library's bytes (tests/unit/crypto)
    )
    reaper = StaleJobReaper(
        store=store,
        events=events,
        max_limits=max_limits,
        pending_timeout=settings.pending_timeout,
        storage_timeout=settings.storage_timeout,
    )
    return WorkerParts(extraction, relay, reaper, source, republisher, objects)
