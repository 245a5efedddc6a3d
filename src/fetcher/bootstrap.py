"""The one composition root: ``async with build_runtime(settings) as rt:``.

It is the only place that reads :class:`~fetcher.settings.Settings` and builds real objects:
stores, connectors, object storage, messaging and the bearer-token authenticator are opened in
an ``AsyncExitStack`` and handed to the services as ports. Every service is complete when it is
built: nothing is set on it afterwards. The hosts (``fetcher.manager``, ``fetcher.worker``,
``fetcher.cli``) never import an adapter; what they need of one comes through
:class:`Runtime`. Optional drivers stay optional: the PostgreSQL store and connector are
imported only when a PostgreSQL store or datasource is used, so embedded mode on SQLite runs
without the ``postgres`` extra. Tests build a :class:`Runtime` from fakes through
:func:`assemble_runtime`, the same composition.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pybase64

from fetcher.adapters.jsonlayout import BatchEncoder
from fetcher.adapters.messaging.inprocess import InProcessEventBus, InProcessWorkQueue
from fetcher.adapters.objectstore.local import LocalObjectStore
from fetcher.adapters.spool import EncryptedSpoolFactory
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.adapters.tracing import install_tracing
from fetcher.crypto import Redactor
from fetcher.engine import DEFAULT_LIMITS, ConnectionDescriptor, ConnectorRegistry, Engine, Limits
from fetcher.services.connections.catalog import ConnectionCatalog
from fetcher.services.connections.credentials import CredentialCipher
from fetcher.services.connections.dialer import ConnectionDialer
from fetcher.services.connections.directory import ConnectionDirectory
from fetcher.services.connections.editor import ConnectionEditor
from fetcher.services.connections.name_collisions import log_name_collisions
from fetcher.services.connections.rekey import RekeyReport, rekey_credentials
from fetcher.services.connections.schema_cache import SchemaCache
from fetcher.services.connections.schema_inspection import SchemaInspector
from fetcher.services.connections.sqlite_files import SqlitePolicy
from fetcher.services.connections.tester import ConnectionTester
from fetcher.services.connections.use_cases import ConnectionServices
from fetcher.services.events.feed import EventFeed
from fetcher.services.events.job_events import EventContext
from fetcher.services.events.outbox import OutboxRelay
from fetcher.services.infrastructure import (
    Authenticator,
    EventPublisher,
    ObjectStore,
    WorkPublisher,
    WorkSource,
)
from fetcher.services.jobs.cursor import CursorCodec, cursor_key
from fetcher.services.jobs.download import ResultDownloads
from fetcher.services.jobs.extraction import ExtractionService
from fetcher.services.jobs.listing import JobListService
from fetcher.services.jobs.reaper import StaleJobReaper
from fetcher.services.jobs.service import JobService
from fetcher.services.jobs.work_handler import WorkHandler
from fetcher.services.metrics import Metrics
from fetcher.services.store_roles import (
    BacklogReader,
    ConnectionStore,
    CredentialRekeying,
    FeedStore,
    JobSearch,
    JobStore,
    Outbox,
    StoreLifecycle,
)
from fetcher.settings import Mode, Settings, sqlite_store_path

if TYPE_CHECKING:  # imported where used: the Worker never loads the JWT libraries
    from fetcher.adapters.auth import BearerAuthenticator

__all__ = [
    "Lifecycle",
    "Messaging",
    "MetadataStore",
    "ReadinessCheck",
    "Runtime",
    "WorkerParts",
    "assemble_runtime",
    "build_runtime",
    "metadata_store",
    "rotate_credentials",
]

#: A readiness probe (§2.10): returns normally when up, raises with a reason when down.
ReadinessCheck = Callable[[], Awaitable[None]]


class MetadataStore(
    StoreLifecycle,
    ConnectionStore,
    CredentialRekeying,
    JobStore,
    JobSearch,
    FeedStore,
    Outbox,
    BacklogReader,
    Protocol,
):
    """Every role of the metadata store (``fetcher.services.store_roles``) at once: what the
    composition root opens and hands out role by role. Only the root and the hosts' startup
    (migrations, the embedded lock, recovery) need all of them; services name their roles."""


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
    connections: ConnectionServices
    jobs: JobService
    metrics: Metrics
    readiness: Mapping[str, ReadinessCheck | None]
    #: §14.2 result downloads over the object store (``None`` objects: every download 503).
    downloads: ResultDownloads
    #: The §2.12 event feed over ``store``; a committed terminal transition calls
    #: ``feed.notify()``, waking long-polls at once.
    feed: EventFeed
    #: ``GET /v1/fetcher`` (issue 21) over the store's job search.
    job_list: JobListService
    internal: Mapping[str, ConnectionDescriptor] = field(default_factory=dict)
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    worker: WorkerParts | None = None
    #: §12.1: the bearer-token authenticator of ``AUTH_MODE=jwt`` (``None``: every caller is
    #: anonymous, and always in Worker mode). The host starts and closes it.
    authenticator: Authenticator | None = None


@dataclass
class WorkerParts:
    """What runs the Worker side (Worker and embedded modes). ``republisher`` carries §7.4
    row 7 retries back to the work queue; ``handler`` takes each delivery (§7.4, §4.2)."""

    extraction: ExtractionService
    relay: OutboxRelay
    reaper: StaleJobReaper
    source: WorkSource
    republisher: WorkPublisher
    objects: ObjectStore
    handler: WorkHandler


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
    """Install tracing (issue 22: a no-op unless ``TRACING_ENABLED``; once per process), then
    open every resource the mode needs; close them all in reverse on exit, and flush the spans
    last, the closing steps' included."""
    async with AsyncExitStack() as stack:
        flush_spans = install_tracing(settings.tracing)
        stack.push_async_callback(asyncio.to_thread, flush_spans)  # the flush blocks
        store = await stack.enter_async_context(_open_store(settings))
        await store.migrate()
        await log_name_collisions(
            store,
            list(settings.internal_datasources),
            settings.internal_tenants,
            multi_tenant=settings.multi_tenant,
        )
        messaging = await _open_messaging(settings, stack)
        objects = await _open_objects(settings, stack)
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
    """Wire the services over open ports: real adapters (:func:`build_runtime`) or fakes."""
    metrics, internal = Metrics(mode=settings.mode.value), dict(settings.internal_datasources)
    cipher = CredentialCipher(settings.key_version, settings.keys, settings.previous_keys)
    events = EventContext(source=settings.ce_source, exchange=settings.events_exchange)
    max_limits = DEFAULT_LIMITS.with_result_ceiling(settings.engine_max_result_bytes)
    connections = _connection_services(settings, store, registry, cipher, internal)
    jobs = _job_service(
        settings,
        store,
        connections=connections,
        messaging=messaging,
        events=events,
        metrics=metrics,
        max_limits=max_limits,
    )
    feed = EventFeed(store)
    worker = None
    source, published = messaging.work_source, messaging.events
    if objects is not None and source is not None and published is not None:
        worker = _worker_parts(
            settings=settings,
            store=store,
            registry=registry,
            objects=objects,
            source=source,
            publisher=published,
            republisher=messaging.work_publisher,
            cipher=cipher,
            events=events,
            metrics=metrics,
            max_limits=max_limits,
            internal=internal,
            feed=feed,
        )
    authenticator = _authenticator(settings)
    return Runtime(
        settings=settings,
        store=store,
        registry=registry,
        connections=connections,
        jobs=jobs,
        job_list=_job_list_service(settings, store, connections.directory),
        metrics=metrics,
        readiness=_readiness(settings, store, messaging, worker, authenticator),
        downloads=ResultDownloads(store, objects),
        feed=feed,
        internal=internal,
        worker=worker,
        lifecycle=lifecycle or Lifecycle(),
        authenticator=authenticator,
    )


def _authenticator(settings: Settings) -> BearerAuthenticator | None:
    """§12.1: ``AUTH_MODE=jwt`` guards the Manager's business routes with a bearer-token
    authenticator (``None``: ``AUTH_MODE=none``, and the Worker, which serves no business
    route). The host starts its key loading (``fetcher run``); a bare ``create_app`` starts it
    at the first bearer token instead."""
    if not settings.auth.enabled or settings.mode is Mode.WORKER:
        return None
    from fetcher.adapters.auth import build_authenticator

    return build_authenticator(settings.auth, multi_tenant=settings.multi_tenant)


def _readiness(
    settings: Settings,
    store: MetadataStore,
    messaging: Messaging,
    worker: WorkerParts | None,
    authenticator: BearerAuthenticator | None,
) -> dict[str, ReadinessCheck | None]:
    """The §2.10 checks of the mode: ``object_storage`` where a Worker side runs, and
    ``auth_keys`` with a JWKS (§12.2)."""
    readiness: dict[str, ReadinessCheck | None] = {
        "database": store.ping,
        "rabbitmq": messaging.check,
    }
    if worker is not None:
        readiness["object_storage"] = worker.objects.check
    if authenticator is not None and settings.auth.jwks_url is not None:
        readiness["auth_keys"] = authenticator.keys_check
    return readiness


def _connection_services(
    settings: Settings,
    store: MetadataStore,
    registry: ConnectorRegistry,
    cipher: CredentialCipher,
    internal: Mapping[str, ConnectionDescriptor],
) -> ConnectionServices:
    directory = ConnectionDirectory(
        store=store, internal=internal, internal_tenants=settings.internal_tenants
    )
    sqlite = SqlitePolicy(
        embedded=settings.mode is Mode.EMBEDDED,
        allowed_dir=settings.sqlite_allowed_dir,
        metadata_store_path=settings.sqlite_path,
    )
    dialer = ConnectionDialer(
        cipher=cipher,
        registry=registry,
        sqlite=sqlite,
        ssrf_guard=settings.ssrf_guard,
        redactor=Redactor(secrets=settings.secrets),
    )
    cache = SchemaCache(settings.schema_cache_ttl)
    return ConnectionServices(
        directory=directory,
        catalog=ConnectionCatalog(store=store, directory=directory),
        editor=ConnectionEditor(
            store=store,
            directory=directory,
            cipher=cipher,
            sqlite=sqlite,
            ssrf_guard=settings.ssrf_guard,
            schema_cache=cache,
        ),
        tester=ConnectionTester(directory=directory, dialer=dialer),
        schemas=SchemaInspector(directory=directory, dialer=dialer, cache=cache),
    )


def _job_service(
    settings: Settings,
    store: MetadataStore,
    *,
    connections: ConnectionServices,
    messaging: Messaging,
    events: EventContext,
    metrics: Metrics,
    max_limits: Limits,
) -> JobService:
    return JobService(
        store=store,
        directory=connections.directory,
        tester=connections.tester,
        publisher=messaging.work_publisher,
        internal_key=settings.keys.internal_hmac,
        work_queue=_work_queue(settings),
        events=events,
        max_limits=max_limits,
        metrics=metrics,
    )


def _job_list_service(
    settings: Settings, store: MetadataStore, directory: ConnectionDirectory
) -> JobListService:
    """The job list over the store's search queries (``adapters/store/job_search.py``), its
    cursors signed with a key derived from the internal HMAC key (no setting of its own)."""
    codec = CursorCodec(cursor_key(settings.keys.internal_hmac))
    return JobListService(search=store, directory=directory, cursors=codec)


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
    faster jobs, docs/performance.md). Off by default in the Worker, measured here with
    the S3 server on the same two cores; a Worker with cores of its own may turn it on. The
    Manager extracts nothing."""
    if not settings.encoder_process or settings.mode is Mode.MANAGER:
        return None
    return stack.enter_context(BatchEncoder())


def _open_store(settings: Settings) -> AbstractAsyncContextManager[MetadataStore]:
    # §2.3 FET-0003: the Manager answers 503 within ~1 s when the store is unreachable.
    checkout = 1.0 if settings.mode is Mode.MANAGER else None
    return metadata_store(settings.database_url, checkout_timeout=checkout)


def metadata_store(
    database_url: str, *, checkout_timeout: float | None = None
) -> AbstractAsyncContextManager[MetadataStore]:
    """The metadata store of a ``sqlite:`` or ``postgresql://`` URL, not opened yet (a
    process start, and ``fetcher migrate`` with nothing else of the settings)."""
    sqlite_path = sqlite_store_path(database_url)
    if sqlite_path is not None:  # the store creates its file 0600, its directory 0700
        return SqliteMetadataStore(sqlite_path)
    # Imported here: psycopg is the optional ``postgres`` extra, which embedded mode on
    # SQLite does not need. libpq takes ``postgresql://`` and ``postgres://`` URLs as they are.
    from fetcher.adapters.store.postgres import PostgresMetadataStore

    return PostgresMetadataStore(database_url, checkout_timeout=checkout_timeout)


async def _open_objects(settings: Settings, stack: AsyncExitStack) -> ObjectStore | None:
    """The result store. A Manager opens one only when S3 is configured (§14.2: it serves
    downloads; without it, a download answers 503 FET-1103)."""
    storage = settings.object_storage
    if settings.mode is Mode.MANAGER and (storage.endpoint is None or not storage.bucket):
        return None
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
    source: WorkSource,
    publisher: EventPublisher,
    republisher: WorkPublisher,
    cipher: CredentialCipher,
    events: EventContext,
    metrics: Metrics,
    max_limits: Limits,
    internal: Mapping[str, ConnectionDescriptor],
    feed: EventFeed,
) -> WorkerParts:
    """The Worker's services. ``publisher`` carries the outbox's events, ``republisher`` the
    §7.4 retries back to the work queue; ``cipher``, ``events``, ``metrics``, ``max_limits``
    and ``internal`` are the ones the front services use too. A committed terminal transition
    wakes the outbox relay and the feed's long-polls."""
    relay = _relay(settings, store, publisher, metrics)

    def committed() -> None:
        relay.kick()
        feed.notify()

    extraction = ExtractionService(
        store=store,
        connections=store,
        objects=objects,
        engine=Engine(
            registry, limits=max_limits, spools=EncryptedSpoolFactory(settings.spool_memory_bytes)
        ),
        keys=settings.keys,
        cipher=cipher,
        events=events,
        metrics=metrics,
        key_prefix=settings.object_storage.key_prefix,
        storage_timeout=settings.storage_timeout,
        internal=internal,
        internal_tenants=settings.internal_tenants,
        redactor=Redactor(secrets=settings.secrets),
        on_commit=committed,
        ssrf_guard=settings.ssrf_guard,
        b64encode=pybase64.b64encode,  # SIMD, the standard library's bytes (tests/unit/crypto)
        key_version=settings.key_version,
    )
    reaper = _reaper(settings, store, events, max_limits)
    handler = _work_handler(
        settings,
        store=store,
        extraction=extraction,
        republisher=republisher,
        events=events,
        metrics=metrics,
    )
    return WorkerParts(extraction, relay, reaper, source, republisher, objects, handler)


def _relay(
    settings: Settings, store: MetadataStore, publisher: EventPublisher, metrics: Metrics
) -> OutboxRelay:
    """§8.6: publishes each committed event right away, and repairs what a crash left."""
    return OutboxRelay(
        store=store,
        publisher=publisher,
        keys=settings.keys,
        exchange=settings.events_exchange,
        metrics=metrics,
    )


def _reaper(
    settings: Settings, store: MetadataStore, events: EventContext, max_limits: Limits
) -> StaleJobReaper:
    """§4.4: fails stale ``pending`` and ``processing`` jobs, each with its one event."""
    return StaleJobReaper(
        store=store,
        events=events,
        max_limits=max_limits,
        pending_timeout=settings.pending_timeout,
        storage_timeout=settings.storage_timeout,
    )


def _work_handler(
    settings: Settings,
    *,
    store: MetadataStore,
    extraction: ExtractionService,
    republisher: WorkPublisher,
    events: EventContext,
    metrics: Metrics,
) -> WorkHandler:
    """The Worker's handler of each delivery: verify (§7.4), claim (§4.2), extract, ack."""
    return WorkHandler(
        store=store,
        extraction=extraction,
        republisher=republisher,
        internal_key=settings.keys.internal_hmac,
        events=events,
        metrics=metrics,
        pending_timeout=settings.pending_timeout,
        multi_tenant=settings.multi_tenant,
        previous_internal_keys=tuple(k.internal_hmac for k in settings.previous_keys.values()),
    )


async def rotate_credentials(settings: Settings) -> RekeyReport:
    """§14.3 ``fetcher rotate-credentials``: open (and migrate) the metadata store of
    ``settings`` and re-encrypt every stored credential under the current key."""
    cipher = CredentialCipher(settings.key_version, settings.keys, settings.previous_keys)
    async with _open_store(settings) as store:
        await store.migrate()
        return await rekey_credentials(store, cipher)
