"""A sync httpx transport that hands each request to an ASGI app served by a running event
loop, so that the synchronous client (and the CLI on it) can talk to the in-process Manager
from a worker thread (``asyncio.to_thread``) while the test's loop serves the app."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

__all__ = ["LoopTransport"]


class LoopTransport(httpx.BaseTransport):
    def __init__(self, app: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._inner = httpx.ASGITransport(app=app)
        self._loop = loop
        self.requests: list[httpx.Request] = []

    async def _send(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        body = await response.aread()
        return httpx.Response(response.status_code, headers=response.headers, content=body)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        request.read()
        future = asyncio.run_coroutine_threadsafe(self._send(request), self._loop)
        return future.result(timeout=30)
