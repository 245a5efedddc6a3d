"""A real Fetcher stack with a chaos proxy in front of every dependency.

One Manager and N Workers (``fetcher run`` processes, from :mod:`tests.e2e.harness`) reach
the metadata PostgreSQL, RabbitMQ, the S3 server and the source PostgreSQL database only
through :class:`~tests.chaos.proxy.ChaosProxy` instances; the observer (this process) talks
to each dependency directly, so it sees the truth while the processes see the faults.

The source is an internal datasource (§9.4) pointing at the source proxy: the Manager does
not live-test internal datasources (§3.6 step 14b), so a source fault reaches the Workers'
extraction only, as in production where the Manager's test ran long before.

Used by the chaos smoke test, ``bench/chaos.py``, ``bench/soak.py`` and ``bench/scaleout.py``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from tests.chaos.proxy import ChaosProxy
from tests.e2e.harness import (
    CE_SOURCE,
    MASTER_KEY,
    Broker,
    ConsumerKeys,
    Database,
    DatabaseFactory,
    EventCollector,
    FetcherProcess,
    ManagerApi,
    Names,
    ProcessLauncher,
    ResultStore,
    derive_cli_key,
    slow_view_sql,
    take_dead_letters,
)
from tests.services import (
    RABBITMQ_URL,
    S3_ACCESS_KEY,
    S3_ENDPOINT,
    S3_SECRET_KEY,
    fresh_bucket,
    s3_test_client,
)

__all__ = ["SOURCE", "ChaosStack", "Proxies", "chaos_stack"]

PENDING_TIMEOUT_SECONDS = 300
STORAGE_TIMEOUT_SECONDS = 30
#: The internal datasource's configName.
SOURCE = "chaos_src"
SOURCE_PASSWORD = f"chaos-Secret-{secrets.token_hex(6)}"
SOURCE_SCHEMA = """
CREATE TABLE public.items (id integer PRIMARY KEY, name text NOT NULL, amount numeric(12, 2));
INSERT INTO public.items
    SELECT g, 'item-' || g, g * 1.25 FROM generate_series(1, 20) AS g;
"""
#: A view whose rows trickle (0.05 s each, 40 rows: a 2 s stream) for mid-stream cuts.
SLOW_VIEW = "public.trickle"
SLOW_SCHEMA = slow_view_sql(SLOW_VIEW, rows=40, seconds_per_row=0.05)


@dataclass(frozen=True)
class Proxies:
    metadata: ChaosProxy
    broker: ChaosProxy
    storage: ChaosProxy
    source: ChaosProxy

    def all(self) -> list[ChaosProxy]:
        return [self.metadata, self.broker, self.storage, self.source]

    def by_name(self, name: str) -> ChaosProxy:
        proxy: ChaosProxy = getattr(self, name)
        return proxy


@dataclass
class ChaosStack:
    """What a chaos scenario works with."""

    api: ManagerApi
    manager: FetcherProcess
    workers: list[FetcherProcess]
    launcher: ProcessLauncher
    broker: Broker
    metadata: Database
    source: Database
    results: ResultStore
    keys: ConsumerKeys
    proxies: Proxies
    worker_env: dict[str, str] = field(default_factory=dict)

    async def add_worker(self) -> FetcherProcess:
        worker = await self.launcher.worker(**self.worker_env)
        self.workers.append(worker)
        return worker

    def live_workers(self) -> list[FetcherProcess]:
        return [w for w in self.workers if w.process.poll() is None]


def _ports(proxies: Proxies, direct: bool) -> dict[str, int]:
    """The port each process dials per dependency: its proxy, or the server itself."""
    if not direct:
        return {name: proxies.by_name(name).port for name in PROXIED}
    return {name: proxies.by_name(name).upstream_port for name in PROXIED}


PROXIED = ("metadata", "broker", "storage", "source")


def _base_env(
    metadata: Database,
    source: Database,
    names: Names,
    bucket: str,
    ports: Mapping[str, int],
) -> dict[str, str]:
    amqp = urlsplit(RABBITMQ_URL)
    meta_url = metadata.url.replace(f":{metadata.port}/", f":{ports['metadata']}/")
    return {
        "PATH": os.environ.get("PATH", ""),
        "LANG": "C.UTF-8",
        "APP_ENC_KEY": MASTER_KEY,
        "DATABASE_URL": meta_url,
        "RABBITMQ_HOST": "127.0.0.1",
        "RABBITMQ_PORT_AMQP": str(ports["broker"]),
        "RABBITMQ_DEFAULT_USER": unquote(amqp.username or "guest"),
        "RABBITMQ_DEFAULT_PASS": unquote(amqp.password or "guest"),
        "RABBITMQ_FETCHER_WORK_QUEUE": names.work_queue,
        "RABBITMQ_JOB_EVENTS_EXCHANGE": names.events_exchange,
        "STREAMING_ENABLED": "true",
        "STREAMING_CLOUDEVENTS_SOURCE": CE_SOURCE,
        "OBJECT_STORAGE_ENDPOINT": f"http://127.0.0.1:{ports['storage']}",
        "OBJECT_STORAGE_BUCKET": bucket,
        "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "OBJECT_STORAGE_SECRET_KEY": S3_SECRET_KEY,
        "OBJECT_STORAGE_USE_PATH_STYLE": "true",
        "READYZ_DRAIN_DELAY_SEC": "1",
        "LOG_LEVEL": "warn",
        # §9.1 minimum for the pending window; a short storage bound keeps the §4.4
        # processing window at timeoutSeconds + 30 + 180 s.
        "PENDING_TIMEOUT_SECONDS": str(PENDING_TIMEOUT_SECONDS),
        "STORAGE_TIMEOUT_SECONDS": str(STORAGE_TIMEOUT_SECONDS),
        "DATASOURCE_CHAOS_CONFIG_NAME": SOURCE,
        "DATASOURCE_CHAOS_TYPE": "postgresql",
        "DATASOURCE_CHAOS_HOST": "127.0.0.1",
        "DATASOURCE_CHAOS_PORT": str(ports["source"]),
        "DATASOURCE_CHAOS_DATABASE": source.name,
        "DATASOURCE_CHAOS_USER": "postgres",
        "DATASOURCE_CHAOS_PASSWORD": SOURCE_PASSWORD,
    }


@contextlib.asynccontextmanager
async def _proxies(metadata: Database) -> AsyncIterator[Proxies]:
    s3_port = urlsplit(S3_ENDPOINT).port or 80
    amqp_port = urlsplit(RABBITMQ_URL).port or 5672
    async with (
        ChaosProxy(metadata.port) as meta,
        ChaosProxy(amqp_port) as amqp,
        ChaosProxy(s3_port) as s3,
        ChaosProxy(metadata.port) as src,
    ):
        yield Proxies(meta, amqp, s3, src)


@contextlib.asynccontextmanager
async def _broker(names: Names) -> AsyncIterator[Broker]:
    """The observer's own AMQP connection (direct, no proxy) and its ``job.*`` queue."""
    import aio_pika

    connection = await aio_pika.connect(RABBITMQ_URL, timeout=5)
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
        with contextlib.suppress(Exception):
            async with broker.channel() as channel:
                await take_dead_letters(channel, names.work_queue)
        await connection.close()


@contextlib.asynccontextmanager
async def chaos_stack(
    log_dir: Path,
    *,
    workers: int = 2,
    worker_env: Mapping[str, str] | None = None,
    manager_env: Mapping[str, str] | None = None,
    direct: bool = False,
) -> AsyncIterator[ChaosStack]:
    """Fresh databases, names and bucket; proxies; one Manager and ``workers`` Workers.
    ``direct``: the processes dial the servers themselves (no fault injection, and no proxy
    in this process on every byte: for throughput figures). Everything is stopped (by PID)
    and removed at the end."""
    suffix = secrets.token_hex(4)
    names = Names(
        work_queue=f"fetcher.chaos.work.{suffix}",
        events_exchange=f"fetcher.chaos.events.{suffix}",
        consumer_queue=f"fetcher.chaos.consumer.{suffix}",
    )
    factory = DatabaseFactory()
    try:
        metadata = factory.create("fetcher_chaos_meta")
        source = factory.create("fetcher_chaos_src", SOURCE_SCHEMA + SLOW_SCHEMA)
        keys = ConsumerKeys(external=derive_cli_key("external"), storage=derive_cli_key("storage"))
        with s3_test_client() as s3, fresh_bucket(s3, "fetcher-chaos") as bucket:
            async with (
                _proxies(metadata) as proxies,
                _broker(names) as broker,
                httpx.AsyncClient(timeout=15.0) as http,
            ):
                env = _base_env(metadata, source, names, bucket, _ports(proxies, direct))
                launcher = ProcessLauncher(
                    env, log_dir, http, secrets=(MASTER_KEY, S3_SECRET_KEY, SOURCE_PASSWORD)
                )
                try:
                    parts = {
                        "broker": broker, "metadata": metadata, "source": source,
                        "results": ResultStore(s3, bucket), "keys": keys, "proxies": proxies,
                    }  # fmt: skip
                    stack = await _start(
                        launcher, parts, workers, dict(worker_env or {}), dict(manager_env or {})
                    )
                    yield stack
                finally:
                    await launcher.stop_all()
    finally:
        factory.drop_all()


async def _start(
    launcher: ProcessLauncher, parts: dict[str, Any], workers: int, worker_env: dict[str, str],
    manager_env: dict[str, str],
) -> ChaosStack:  # fmt: skip
    """One Manager, then ``workers`` Workers; ``parts`` are the remaining stack fields."""
    manager = await launcher.manager(**manager_env)
    api = ManagerApi(launcher.http, manager.base_url)
    stack = ChaosStack(api, manager, [], launcher, worker_env=worker_env, **parts)
    for _ in range(workers):
        await stack.add_worker()
    return stack


def stack_summary(stack: ChaosStack) -> dict[str, Any]:
    """Where everything is, for a report (no secrets)."""
    return {
        "manager": stack.manager.base_url,
        "workers": [w.base_url for w in stack.workers],
        "proxies": {
            name: proxy.port
            for name, proxy in zip(
                ("metadata", "broker", "storage", "source"), stack.proxies.all(), strict=True
            )
        },
    }
