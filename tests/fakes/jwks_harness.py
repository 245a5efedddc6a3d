"""A Manager application with ``AUTH_MODE=jwt`` for the in-process §12 tests.

The same composition as ``tests/unit/manager/conftest.py`` (a SQLite store, fake connectors
and publisher, ``create_app``), driven through httpx's ASGI transport, with the
authenticator's key loading started and awaited, and closed at the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from fetcher.adapters.auth import BearerAuthenticator
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.bootstrap import Runtime
from fetcher.manager.app import create_app
from fetcher.settings import Settings
from tests.fakes.jwks_server import ISSUER
from tests.unit.manager.conftest import AutoRegistry, FakePublisher, base_env, build_runtime

__all__ = ["SECRET", "SECRET_B64", "AuthApp", "auth_app", "jwks_env", "secret_env"]

SECRET = b"0123456789abcdef0123456789abcdef-test-secret"
SECRET_B64 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYtdGVzdC1zZWNyZXQ="


def jwks_env(url: str, **extra: str) -> dict[str, str]:
    return {"AUTH_MODE": "jwt", "AUTH_ISSUER": ISSUER, "AUTH_JWKS_URL": url, **extra}


def secret_env(**extra: str) -> dict[str, str]:
    return {"AUTH_MODE": "jwt", "AUTH_ISSUER": ISSUER, "AUTH_JWT_SECRET": SECRET_B64, **extra}


@dataclass
class AuthApp:
    app: FastAPI
    runtime: Runtime
    client: httpx.AsyncClient

    @property
    def authenticator(self) -> BearerAuthenticator:
        auth: BearerAuthenticator = self.app.state.authenticator
        return auth

    async def wait_for_keys(self, within: float = 10.0) -> None:
        self.authenticator.start()
        async with asyncio.timeout(within):
            while self.authenticator.keys.ring is None:  # noqa: ASYNC110 - a plain attribute
                await asyncio.sleep(0.02)

    def bearer(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    async def get(self, path: str, token: str | None = None, **kw: Any) -> httpx.Response:
        headers = self.bearer(token) if token is not None else {}
        return await self.client.get(path, headers={**headers, **kw.pop("headers", {})}, **kw)


@asynccontextmanager
async def auth_app(
    tmp_path: Path, env: Mapping[str, str], *, wait: bool = True
) -> AsyncIterator[AuthApp]:
    """An in-process Manager (embedded mode) with ``env`` over the unit-test composition."""
    settings = Settings.from_env({**base_env(tmp_path), **env})
    store = SqliteMetadataStore(tmp_path / "meta.db")
    await store.open()
    try:
        await store.migrate()
        runtime = build_runtime(settings, store, AutoRegistry(), FakePublisher())
        runtime.lifecycle.started.set()
        app = create_app(runtime)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            harness = AuthApp(app, runtime, client)
            try:
                if wait and app.state.authenticator is not None:
                    await harness.wait_for_keys()
                yield harness
            finally:
                if app.state.authenticator is not None:
                    await app.state.authenticator.aclose()
    finally:
        await store.close()
