"""The key sources of §12.2: a JWKS kept fresh in the background, or the HS256 secret.

:class:`JwksSource` (``AUTH_JWKS_URL``):

* The first load starts with the process and never refuses the start: a failure is retried
  with a backoff from 1 s to 30 s. Until a key set is loaded, :attr:`ring` is ``None`` (the
  authenticator answers 503 to a bearer token) and :meth:`check` fails (``/readyz``
  ``auth_keys`` down).
* Once loaded, the set is refreshed every ``AUTH_JWKS_REFRESH_SECONDS``. A failed refresh
  keeps the last good set and is retried with the same backoff (never later than the period).
* :meth:`refetch_unknown` serves a token whose ``kid`` is unknown: it refetches only when the
  last fetch *started* at least 30 s earlier (a flood of made-up ``kid`` values cannot turn
  into a flood of fetches), and concurrent callers share one fetch.
* A fetch is bounded: :data:`FETCH_TIMEOUT_SECONDS` in all, :data:`MAX_JWKS_BYTES` of body,
  no redirects followed, TLS verified for ``https``. ``http`` reaches only loopback hosts and
  ``file:///`` a local file (§9.1, checked by the settings). Parsing the keys runs in a thread:
  it builds ``cryptography`` key objects, milliseconds for a large set.

:class:`StaticKeys` (``AUTH_JWT_SECRET``) is always loaded and never refetches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx

from fetcher.adapters.auth.keys import KeyRing, KeySetError, parse_jwks

__all__ = [
    "BACKOFF_SECONDS",
    "FETCH_TIMEOUT_SECONDS",
    "MAX_JWKS_BYTES",
    "REFETCH_INTERVAL_SECONDS",
    "JwksSource",
    "StaticKeys",
]

log = logging.getLogger(__name__)

#: §12.2: retry delays while no key set is loaded (and after a failed refresh).
BACKOFF_SECONDS = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
#: §12.2: an unknown ``kid`` refetches only when the last fetch started this long ago.
REFETCH_INTERVAL_SECONDS = 30.0
#: One fetch, connection and body included.
FETCH_TIMEOUT_SECONDS = 10.0
#: A larger JWKS document is refused (a key set is a few KiB).
MAX_JWKS_BYTES = 512 * 1024


class StaticKeys:
    """The HS256 secret as a key source: loaded from the start, nothing to refresh."""

    def __init__(self, ring: KeyRing) -> None:
        self.ring: KeyRing | None = ring

    def start(self) -> None:
        return None

    async def refetch_unknown(self) -> bool:
        return False

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class JwksSource:
    """``AUTH_JWKS_URL``, loaded and refreshed in the background (module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        refresh_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        refetch_interval: float = REFETCH_INTERVAL_SECONDS,
    ) -> None:
        self.ring: KeyRing | None = None
        self._url = url
        self._refresh = refresh_seconds
        self._clock = clock
        self._refetch_interval = refetch_interval
        self._last_started: float | None = None
        self._inflight: asyncio.Task[bool] | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None

    def start(self) -> None:
        """Begin the background load and refresh (idempotent; needs a running loop)."""
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._maintain(), name="jwks-refresh")

    async def aclose(self) -> None:
        for task in (self._loop_task, self._inflight):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._loop_task = self._inflight = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def check(self) -> None:
        """§2.10 ``auth_keys``: up once a key set is loaded."""
        if self.ring is None:
            raise RuntimeError("no JWKS key set loaded yet")

    async def refetch_unknown(self) -> bool:
        """§12.2 unknown ``kid``: refetch when allowed; ``True`` when a fetch ran (or was
        running) and the caller should look again."""
        if self._inflight is None:
            last = self._last_started
            if last is not None and self._clock() - last < self._refetch_interval:
                return False
        return await self._fetch_shared()

    async def _maintain(self) -> None:
        failures = 0
        while True:
            ok = await self._fetch_shared()
            failures = 0 if ok else failures + 1
            if ok:
                delay = self._refresh
            else:
                delay = BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS)) - 1]
                if self.ring is not None:
                    delay = min(delay, self._refresh)
            await asyncio.sleep(delay)

    async def _fetch_shared(self) -> bool:
        """One fetch at a time; a caller arriving during one waits for it."""
        if self._inflight is None:
            self._last_started = self._clock()
            self._inflight = asyncio.create_task(self._fetch(), name="jwks-fetch")
            self._inflight.add_done_callback(self._forget)
        return await asyncio.shield(self._inflight)

    def _forget(self, task: asyncio.Task[bool]) -> None:
        if self._inflight is task:
            self._inflight = None

    async def _fetch(self) -> bool:
        try:
            async with asyncio.timeout(FETCH_TIMEOUT_SECONDS):
                document = await self._read()
            ring = await asyncio.to_thread(parse_jwks, document)
        except Exception as exc:  # any failure keeps the last good set; the loop must live
            kept = "; keeping the last good key set" if self.ring is not None else ""
            log.warning("auth: JWKS fetch failed: %s%s", _reason(exc), kept)
            return False
        if self.ring is None:
            log.info("auth: JWKS loaded (%d keys)", len(ring))
        self.ring = ring
        return True

    async def _read(self) -> bytes:
        parts = urlsplit(self._url)
        if parts.scheme.lower() == "file":
            return await asyncio.to_thread(_read_file, Path(unquote(parts.path)))
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS, follow_redirects=False)
        async with self._client.stream(
            "GET", self._url, headers={"Accept": "application/json"}
        ) as response:
            if response.status_code != 200:
                raise KeySetError(f"HTTP status {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_JWKS_BYTES:
                    raise KeySetError("the JWKS document is too large")
            return bytes(body)


def _read_file(path: Path) -> bytes:
    with path.open("rb") as handle:
        document = handle.read(MAX_JWKS_BYTES + 1)
    if len(document) > MAX_JWKS_BYTES:
        raise KeySetError("the JWKS document is too large")
    return document


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"timed out after {FETCH_TIMEOUT_SECONDS:g}s"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
