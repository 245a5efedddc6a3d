"""An in-process Manager (create_app over a SQLite store and fakes, as tests/unit/manager
builds it) behind httpx.ASGITransport, and an AsyncFetcherClient talking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.client import AsyncFetcherClient
from fetcher.manager.app import create_app
from fetcher.settings import Settings
from tests.unit.manager.conftest import AutoRegistry, FakePublisher, base_env, build_runtime


@dataclass
class InProcess:
    app: Any
    registry: AutoRegistry
    publisher: FakePublisher
    client: AsyncFetcherClient


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[InProcess]:
    settings = Settings.from_env(base_env(tmp_path))
    store = SqliteMetadataStore(tmp_path / "meta.db")
    await store.open()
    await store.migrate()
    registry, publisher = AutoRegistry(), FakePublisher()
    runtime = build_runtime(settings, store, registry, publisher)
    runtime.lifecycle.started.set()
    app = create_app(runtime)
    client = AsyncFetcherClient("http://127.0.0.1", transport=httpx.ASGITransport(app=app))
    try:
        yield InProcess(app, registry, publisher, client)
    finally:
        await client.aclose()
        await store.close()
