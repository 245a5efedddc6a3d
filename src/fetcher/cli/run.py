"""``fetcher run``: the Manager, the Worker or embedded mode, as ``FETCHER_MODE`` selects.

Refusals (§9.3) print one ``startup refused: <reason>`` line to stderr and exit 1 before any
port opens. SIGTERM/SIGINT drain: ``/readyz`` turns 503 at once, the Worker stops consuming
at once and finishes its in-flight jobs, the HTTP server keeps serving for
``READYZ_DRAIN_DELAY_SEC`` and then stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import AsyncIterator

import uvicorn
from starlette.types import ASGIApp

from fetcher.bootstrap import Runtime, build_runtime
from fetcher.cli.logs import configure_logging
from fetcher.crypto import Redactor
from fetcher.settings import Mode, Settings, StartupRefused
from fetcher.worker.health import create_health_app
from fetcher.worker.main import recover_embedded_jobs, run_worker

__all__ = ["listen_socket", "run_command", "running"]


def run_command(env: dict[str, str]) -> int:
    try:
        settings = Settings.from_env(env)
    except StartupRefused as refused:
        sys.stderr.write(f"startup refused: {refused.reason}\n")
        return 1
    configure_logging(settings.log_level, Redactor(secrets=settings.secrets), settings.env_name)
    try:
        return asyncio.run(_serve_until_signal(settings))
    except StartupRefused as refused:
        sys.stderr.write(f"startup refused: {refused.reason}\n")
        return 1


def listen_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket (port 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host or "0.0.0.0", port))  # noqa: S104 - an empty SERVER_ADDRESS host means all
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def _serve_until_signal(settings: Settings) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if settings.mode is Mode.WORKER:
        sock = listen_socket("", settings.health_port)  # §9.1: all interfaces
    else:
        sock = listen_socket(settings.server_host, settings.server_port)
    async with running(settings, sockets=[sock]) as runtime:
        await stop.wait()
        runtime.lifecycle.draining.set()
    return 0


@contextlib.asynccontextmanager
async def running(
    settings: Settings, *, sockets: list[socket.socket], drain_delay: float | None = None
) -> AsyncIterator[Runtime]:
    """Start every part the mode runs; on exit drain and stop them (§9.3)."""
    async with build_runtime(settings) as runtime:
        if settings.mode is Mode.EMBEDDED and not await runtime.store.acquire_process_lock():
            raise StartupRefused("another embedded process uses this metadata store")
        worker_stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        server = None
        if settings.mode is Mode.EMBEDDED:
            await recover_embedded_jobs(runtime)
        if runtime.worker is not None:
            tasks.append(asyncio.create_task(run_worker(runtime, worker_stop), name="worker"))
        if sockets:
            server = _http_server(runtime)
            tasks.append(asyncio.create_task(server.serve(sockets=sockets), name="http"))
            while not server.started:  # noqa: ASYNC110 - uvicorn exposes only a flag
                await asyncio.sleep(0.01)
        runtime.lifecycle.started.set()
        try:
            yield runtime
        finally:
            runtime.lifecycle.draining.set()
            worker_stop.set()
            if server is not None:
                delay = settings.readyz_drain_delay if drain_delay is None else drain_delay
                await asyncio.sleep(delay)
                server.should_exit = True
            await asyncio.gather(*tasks, return_exceptions=True)


def _http_server(runtime: Runtime) -> uvicorn.Server:
    """The Manager API (manager, embedded) or the Worker's health server (worker)."""
    if runtime.settings.mode is Mode.WORKER:
        app: ASGIApp = create_health_app(runtime)
    else:  # imported here: the Worker never loads FastAPI and pydantic (bounded memory)
        from fetcher.manager.app import create_app

        app = create_app(runtime)
    config = uvicorn.Config(
        app,
        log_config=None,
        lifespan="off",
        access_log=False,
        server_header=False,
    )
    return uvicorn.Server(config)
