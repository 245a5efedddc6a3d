"""``fetcher run``: the Manager, the Worker or embedded mode, as ``FETCHER_MODE`` selects.

Refusals (§9.3) print one ``startup refused: <reason>`` line to stderr and exit 1 before any
port opens. SIGTERM/SIGINT drain: ``/readyz`` turns 503 at once, the Worker stops consuming
at once and finishes its in-flight jobs, the HTTP server keeps serving for
``READYZ_DRAIN_DELAY_SEC`` and then stops.

The HTTP server disconnects a client that has not sent complete request headers within
:data:`HEADER_TIMEOUT_SECONDS` (§13 "HTTP connections"); uvicorn has no such timeout itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence

import h11
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from fetcher import __version__
from fetcher.bootstrap import Lifecycle, Runtime, build_runtime
from fetcher.cli.arguments import parse_or_exit_code
from fetcher.cli.logs import configure_logging
from fetcher.cli.startup import FrontApp
from fetcher.crypto import Redactor
from fetcher.crypto.redact import LOG_REDACTED
from fetcher.settings import Mode, Settings, StartupRefused
from fetcher.worker.health import create_health_app
from fetcher.worker.main import recover_embedded_jobs, run_worker

__all__ = [
    "HEADER_TIMEOUT_SECONDS",
    "STARTUP_EVENT",
    "UNAUTHENTICATED_WARNING",
    "configured_settings",
    "is_loopback_host",
    "listen_socket",
    "log_startup",
    "run_command",
    "running",
    "startup_refused",
    "warn_if_unauthenticated",
]

log = logging.getLogger(__name__)


def run_command(argv: Sequence[str], env: dict[str, str]) -> int:
    parsed = parse_or_exit_code(
        "fetcher run",
        "Start the component FETCHER_MODE selects (manager, worker or embedded). Every setting "
        "comes from the environment (docs/settings.md); a bad one prints 'startup refused: "
        "<reason>' and exits 1 before any port opens.",
        argv,
    )
    if isinstance(parsed, int):
        return parsed
    try:
        return asyncio.run(_serve_until_signal(configured_settings(env)))
    except StartupRefused as refusal:
        return startup_refused(refusal)


def configured_settings(env: Mapping[str, str]) -> Settings:
    """The §9 settings of ``env``, with logging configured from them (``fetcher run`` and
    ``fetcher demo``). Raises :class:`StartupRefused`."""
    settings = Settings.from_env(env)
    configure_logging(settings.log_level, Redactor(secrets=settings.secrets), settings.env_name)
    return settings


def startup_refused(refusal: StartupRefused) -> int:
    """§9.3: one ``startup refused: <reason>`` line on stderr, and exit status 1."""
    sys.stderr.write(f"startup refused: {refusal.reason}\n")
    return 1


def listen_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket (port 0 picks a free one).

    The protocol is named (``IPPROTO_TCP``, not 0) because asyncio sets ``TCP_NODELAY`` only on
    accepted sockets that carry it: without it, Nagle's algorithm held every response body
    until the client's delayed ACK, about 40 ms per request on loopback.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host or "0.0.0.0", port))  # noqa: S104 - an empty SERVER_ADDRESS host means all
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _listen_or_refuse(host: str, port: int) -> socket.socket:
    """A port that cannot be bound (in use, not permitted) is one ``startup refused`` line and
    exit 1, like a §9.3 refusal, instead of a traceback."""
    try:
        return listen_socket(host, port)
    except OSError as exc:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise StartupRefused(f"cannot listen on {where}: {exc.strerror or exc}") from None


async def _serve_until_signal(settings: Settings) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if settings.mode is Mode.WORKER:
        sock = _listen_or_refuse("", settings.health_port)  # §9.1: all interfaces
    else:
        warn_if_unauthenticated(settings)
        sock = _listen_or_refuse(settings.server_host, settings.server_port)
    log_startup(settings, sock)
    try:
        async with running(settings, sockets=[sock], stop=stop) as runtime:
            await stop.wait()
            runtime.lifecycle.draining.set()
    except _StoppedWhileStarting:
        return 0
    return 0


#: The one start-up line of every ``fetcher run`` process (issue 33), logged once its port is
#: bound, before any dependency is reached: an operator reads what runs, where, and how.
STARTUP_EVENT = "fetcher started"


def log_startup(settings: Settings, sock: socket.socket) -> None:
    """``fetcher started: <mode> on <address> (auth <mode>, tracing on|off, version <v>)``
    with ``mode``, ``port``, ``auth_mode``, ``tracing`` and ``version`` as fields too.

    The address is the bound one (the health port for a Worker). It is written in the event
    text, marked as redacted: the redactor's pattern steps would hide an address in a field,
    and the listener's own address is no secret."""
    host, port = sock.getsockname()[:2]
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    mode, auth, tracing = settings.mode.value, settings.auth.mode.value, settings.tracing.enabled
    log.info(
        "%s: %s on %s (auth %s, tracing %s, version %s)",
        STARTUP_EVENT,
        mode,
        address,
        auth,
        "on" if tracing else "off",
        __version__,
        extra={
            **LOG_REDACTED,
            "mode": mode,
            "port": port,
            "auth_mode": auth,
            "tracing": tracing,
            "version": __version__,
        },
    )


#: §12.1: the one warn line of ``AUTH_MODE=none`` on a listener beyond loopback (exact).
UNAUTHENTICATED_WARNING = (
    "authentication is off: every caller can manage connections, create jobs and read events"
)


def warn_if_unauthenticated(settings: Settings) -> bool:
    """§12.1: with ``AUTH_MODE=none``, a Manager (or embedded) listener bound to anything but
    a loopback address (an empty host is every interface) logs one warn line at startup."""
    if settings.mode is Mode.WORKER or settings.auth.enabled:
        return False
    if is_loopback_host(settings.server_host):
        return False
    log.warning(UNAUTHENTICATED_WARNING)
    return True


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP literal; an empty host (all interfaces) is not."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: Backoff between startup attempts while a dependency is unreachable (§9.3).
STARTUP_BACKOFF_SECONDS = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)


@contextlib.asynccontextmanager
async def running(
    settings: Settings,
    *,
    sockets: list[socket.socket],
    drain_delay: float | None = None,
    stop: asyncio.Event | None = None,
) -> AsyncIterator[Runtime]:
    """Start every part the mode runs; on exit drain and stop them (§9.3).

    The HTTP port answers from the start (``/health`` 503 "starting"); building the runtime
    is retried with backoff until every dependency answers or ``stop`` is set.
    """
    lifecycle = Lifecycle()
    front = FrontApp(_check_names(settings), settings.deployment_mode)
    tasks: list[asyncio.Task[None]] = []
    server = _http_server(front) if sockets else None
    if server is not None:
        tasks.append(asyncio.create_task(server.serve(sockets=sockets), name="http"))
    worker_stop = asyncio.Event()
    try:
        async with contextlib.AsyncExitStack() as stack:
            runtime = await _build_with_retry(settings, stack, lifecycle, stop)
            if settings.mode is Mode.EMBEDDED:
                if not await runtime.store.acquire_process_lock():
                    raise StartupRefused("another embedded process uses this metadata store")
                await recover_embedded_jobs(runtime)
            if runtime.worker is not None:
                tasks.append(asyncio.create_task(run_worker(runtime, worker_stop), name="worker"))
            app = _real_app(runtime)
            await _start_authentication(app, stack)
            front.switch(app)
            if server is not None:
                while not server.started:  # noqa: ASYNC110 - uvicorn exposes only a flag
                    await asyncio.sleep(0.01)
            lifecycle.started.set()
            try:
                yield runtime
            finally:
                lifecycle.draining.set()
                worker_stop.set()
                if server is not None:
                    delay = settings.readyz_drain_delay if drain_delay is None else drain_delay
                    await asyncio.sleep(delay)
                    server.should_exit = True
                await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        if server is not None:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)


async def _build_with_retry(
    settings: Settings,
    stack: contextlib.AsyncExitStack,
    lifecycle: Lifecycle,
    stop: asyncio.Event | None,
) -> Runtime:
    """§9.3: an unreachable dependency is retried with backoff, never a refusal."""
    attempt = 0
    while True:
        try:
            return await stack.enter_async_context(build_runtime(settings, lifecycle=lifecycle))
        except StartupRefused:
            raise
        except Exception as exc:
            wait = STARTUP_BACKOFF_SECONDS[min(attempt, len(STARTUP_BACKOFF_SECONDS) - 1)]
            log.warning(
                "startup: a dependency is not reachable yet (%s); retrying in %ss",
                str(exc) or type(exc).__name__,
                wait,
            )
            attempt += 1
        if stop is None:
            await asyncio.sleep(wait)
            continue
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await stop.wait()
        if stop.is_set():
            raise _StoppedWhileStarting


class _StoppedWhileStarting(Exception):
    """A signal arrived before startup finished: exit without serving."""


def _check_names(settings: Settings) -> list[str]:
    """The readiness checks the mode reports (§2.10); ``auth_keys`` with a JWKS (§12.2)."""
    if settings.mode is Mode.WORKER:
        return ["database", "rabbitmq", "object_storage"]
    names = ["database", "rabbitmq"]
    if settings.mode is Mode.EMBEDDED:
        names.append("object_storage")
    if settings.auth.enabled and settings.auth.jwks_url is not None:
        names.append("auth_keys")
    return names


async def _start_authentication(app: ASGIApp, stack: contextlib.AsyncExitStack) -> None:
    """§12.2: the JWKS starts loading with the process (in the background: a failure never
    refuses the start) and stops with it."""
    authenticator = getattr(getattr(app, "state", None), "authenticator", None)
    if authenticator is not None:
        authenticator.start()
        stack.push_async_callback(authenticator.aclose)


def _real_app(runtime: Runtime) -> ASGIApp:
    """The Manager API (manager, embedded) or the Worker's health server (worker)."""
    if runtime.settings.mode is Mode.WORKER:
        return create_health_app(runtime)
    from fetcher.manager.app import create_app  # the Worker never loads FastAPI and pydantic

    return create_app(runtime)


class _Server(uvicorn.Server):
    """A uvicorn server that leaves SIGTERM/SIGINT to ``fetcher run`` (§9.3): uvicorn's own
    handlers would stop serving at once, before the drain delay."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


#: §13: a connection must deliver complete request headers within this many seconds of being
#: opened (or of its previous response, on a kept-alive connection).
HEADER_TIMEOUT_SECONDS = 10.0


class _HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline for complete request headers (§13).

    Without it, a client that sends nothing, or one header byte every few seconds, holds its
    connection (a socket, a buffer, a protocol object) forever: uvicorn's keep-alive timer runs
    only between requests and any byte cancels it. The deadline runs whenever the client is
    expected to send a request head (h11's client state is ``IDLE``): from the moment the
    connection opens, and from the moment a new request cycle starts on a kept-alive one
    (after the response, or after the rest of a body the application answered early). It stops
    as soon as a whole head has been parsed, so slow bodies and slow responses are unaffected;
    later bytes of the same head never restart it.
    """

    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._sync_header_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._sync_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._sync_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def _sync_header_deadline(self) -> None:
        """Run the deadline while a request head is awaited; keep a running one as it is."""
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            self._disarm_header_deadline()
        elif self._header_deadline is None:
            self._header_deadline = self.loop.call_later(
                HEADER_TIMEOUT_SECONDS, self._headers_overdue
            )

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_overdue(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self.transport.close()


def _http_server(app: ASGIApp) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        http=_HeaderDeadlineProtocol,
        log_config=None,
        lifespan="off",
        access_log=False,
        server_header=False,
    )
    return _Server(config)
