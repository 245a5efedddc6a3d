"""The operational routes (contract §2.10, §2.11), one implementation for every host.

The Manager (and embedded mode) serves them on ``SERVER_ADDRESS``, the Worker on
``HEALTH_PORT``; both answer through :class:`Operations`, so their bodies and behaviour cannot
drift. The hosts only route: each turns a :class:`Reply` into its framework's response. This
module lives below both hosts (the hosts never import one another) and knows no web framework.

* ``GET /health``: ``200 {"status":"healthy"}`` once startup finished, else
  ``503 {"status":"unhealthy","reason":"starting"}``; never checks a dependency.
* ``GET /readyz``: the §2.10 report of
  :func:`~fetcher.services.operations.readiness.readiness_report`.
* ``GET /readyz/tenant/{id}``: single-tenant mode, always ``400 FET-1080``; multi-tenant mode
  (§12.5), an ID matching the tenant pattern gets the ``/readyz`` answer plus ``"tenant"``,
  any other ``404 FET-1081`` ``tenant not found``. Tenants are not registered anywhere (a
  tenant exists by carrying tokens), so any well-formed ID is one, and the checks are the
  process's own: every tenant shares its store, broker and keys source.
* ``GET /metrics``: the exposition format 0.0.4, the backlog gauges (``fetcher_outbox_pending``
  of §2.11 and the pending-job and oldest-age gauges of §15.2) read at scrape time.
  A scrape always answers: the read is bounded by the readiness check budget, and a store
  failure of any kind (not only :class:`StoreUnavailableError`: a driver error or a closed
  pool during drain as well) is logged, redacted, and leaves the gauges at their last values.
  Monitoring must keep seeing the other series exactly when the store is in trouble.
* ``GET /version``: ``{"version":"<package version>"}``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Protocol

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from fetcher import __version__
from fetcher.crypto import Redactor, is_tenant_id
from fetcher.crypto.redact import LOG_REDACTED
from fetcher.services.jsontext import compact_json
from fetcher.services.metrics import Metrics
from fetcher.services.operations.readiness import (
    CHECK_BUDGET_SECONDS,
    ReadinessProbe,
    readiness_report,
)
from fetcher.services.store_roles import Backlog

__all__ = [
    "JSON",
    "TENANT_NOT_FOUND_CODE",
    "TENANT_READINESS_CODE",
    "TENANT_READINESS_MESSAGE",
    "TENANT_READINESS_TITLE",
    "OperationalRuntime",
    "Operations",
    "Reply",
]

log = logging.getLogger(__name__)

JSON = "application/json"
#: §2.10 ``GET /readyz/tenant/{id}`` in single-tenant mode (§2.3 title of FET-1080).
TENANT_READINESS_CODE = "FET-1080"
TENANT_READINESS_TITLE = "Tenant Context Required"
TENANT_READINESS_MESSAGE = "tenant readiness is only available in multi-tenant mode"
#: §2.10 multi-tenant mode, an ID that breaks the tenant pattern (§2.3 title of FET-1081).
TENANT_NOT_FOUND_CODE = "FET-1081"
_TENANT_NOT_FOUND = {"code": TENANT_NOT_FOUND_CODE, "title": "Tenant Not Found"}


class _Lifecycle(Protocol):
    @property
    def started(self) -> asyncio.Event: ...
    @property
    def draining(self) -> asyncio.Event: ...


class _Settings(Protocol):
    @property
    def deployment_mode(self) -> str: ...
    @property
    def secrets(self) -> Iterable[str]: ...
    @property
    def multi_tenant(self) -> bool: ...


class _BacklogReader(Protocol):
    async def backlog(self) -> Backlog: ...


class OperationalRuntime(Protocol):
    """What the routes read from a host's runtime (``fetcher.bootstrap.Runtime`` fits)."""

    @property
    def settings(self) -> _Settings: ...
    @property
    def lifecycle(self) -> _Lifecycle: ...
    @property
    def readiness(self) -> Mapping[str, ReadinessProbe | None]: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def store(self) -> _BacklogReader: ...


@dataclass(frozen=True)
class Reply:
    """A response, framework-free: the status, the exact body bytes and their media type."""

    status: int
    body: bytes
    media_type: str = JSON


def _json(body: object, status: int = 200) -> Reply:
    """Compact UTF-8 JSON (§2.1), the bytes every host sends."""
    return Reply(status, compact_json(body).encode())


class Operations:
    """The operational routes over ``runtime``, read at every call (tests and the drain change
    the runtime's readiness checks and lifecycle while the host runs)."""

    def __init__(self, runtime: OperationalRuntime, *, budget: float = CHECK_BUDGET_SECONDS):
        self._runtime = runtime
        self._budget = budget

    @cached_property
    def _redactor(self) -> Redactor:
        """§8.7 step 1 knows the process's secrets (§9.2)."""
        return Redactor(secrets=self._runtime.settings.secrets)

    def health(self) -> Reply:
        if self._runtime.lifecycle.started.is_set():
            return _json({"status": "healthy"})
        return _json({"status": "unhealthy", "reason": "starting"}, 503)

    async def readyz(self) -> Reply:
        status, body = await self._report()
        return _json(body, status)

    async def tenant_readyz(self, tenant_id: str) -> Reply:
        """§2.10 ``GET /readyz/tenant/{id}`` (module docstring)."""
        if not self._runtime.settings.multi_tenant:
            return self.tenant_readiness()
        if not is_tenant_id(tenant_id):
            return _json({**_TENANT_NOT_FOUND, "message": "tenant not found"}, 404)
        status, body = await self._report()
        return _json({**body, "tenant": tenant_id}, status)

    async def _report(self) -> tuple[int, dict[str, object]]:
        runtime = self._runtime
        status, body = await readiness_report(
            runtime.readiness,
            draining=runtime.lifecycle.draining.is_set(),
            version=__version__,
            deployment_mode=runtime.settings.deployment_mode,
            redact=self._redactor.redact,
            gauge=runtime.metrics.readyz_up,
        )
        return status, body

    @staticmethod
    def tenant_readiness() -> Reply:
        """The §2.2 body of ``400 FET-1080`` (single-tenant mode)."""
        body = {
            "code": TENANT_READINESS_CODE,
            "title": TENANT_READINESS_TITLE,
            "message": TENANT_READINESS_MESSAGE,
        }
        return _json(body, 400)

    async def metrics(self) -> Reply:
        metrics = self._runtime.metrics
        try:
            async with asyncio.timeout(self._budget):
                backlog = await self._runtime.store.backlog()
        except TimeoutError:
            log.warning("metrics: backlog read timed out after %gs", self._budget)
        except Exception as exc:  # any failure: the scrape still answers (module docstring)
            detail = self._redactor.redact(str(exc) or type(exc).__name__)
            log.warning("metrics: backlog unavailable: %s", detail, extra=LOG_REDACTED)
        else:
            _set_backlog(metrics, backlog, datetime.now(UTC))
        return Reply(200, generate_latest(metrics.registry), CONTENT_TYPE_PLAIN_0_0_4)

    @staticmethod
    def version() -> Reply:
        return _json({"version": __version__})


def _set_backlog(metrics: Metrics, backlog: Backlog, now: datetime) -> None:
    """The §2.11/§15.2 backlog gauges; an age is 0 when nothing waits (never negative)."""

    def age(oldest: datetime | None) -> float:
        return 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds())

    metrics.outbox_pending.set(backlog.unsent_events)
    metrics.outbox_oldest_age.set(age(backlog.oldest_unsent_at))
    metrics.jobs_pending.set(backlog.pending_jobs)
    metrics.oldest_pending_age.set(age(backlog.oldest_pending_at))
