"""The ``Engine`` facade (contract §1.4): plan, execute, or both under one deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import fields

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.limits import DEFAULT_LIMITS, LIMIT_NAMES, Limits
from fetcher.engine.model import ConnectionDescriptor, ExtractionRequest, ExtractionResult
from fetcher.engine.planner import Plan, plan_request
from fetcher.engine.ports import ConnectorRegistry, ResultSink, SpoolFactory
from fetcher.engine.reuse import ReusedConnectors
from fetcher.engine.runner import execute_plan
from fetcher.engine.spans import engine_span
from fetcher.engine.spool import MemorySpoolFactory

__all__ = ["Engine"]

_REQUEST_NAMES = {attr: name for name, attr in LIMIT_NAMES.items()}


class Engine:
    """Runs extraction requests against connectors from ``registry``.

    ``limits`` are this engine's maxima: a request whose effective limits exceed them fails
    with ``limit override exceeds the configured maximum: limits.<name>`` (§3.5). ``spools``
    buffers each datasource's serialized rows; the default keeps them in memory, which suits
    tests and small jobs — the Worker passes its encrypted, disk-backed spools (§4.3.1).
    """

    def __init__(
        self,
        registry: ConnectorRegistry,
        *,
        limits: Limits = DEFAULT_LIMITS,
        spools: SpoolFactory | None = None,
    ) -> None:
        if registry is None:
            raise TypeError("Engine requires a connector registry")
        self._registry = registry
        self._limits = limits
        self._spools: SpoolFactory = spools if spools is not None else MemorySpoolFactory()

    @property
    def limits(self) -> Limits:
        return self._limits

    async def plan(
        self, request: ExtractionRequest, connections: Mapping[str, ConnectionDescriptor]
    ) -> Plan:
        """Discover and validate (§3.3, §3.4, §4.3 step 2)."""
        return await self._plan(request, connections, self._registry)

    async def _plan(
        self,
        request: ExtractionRequest,
        connections: Mapping[str, ConnectionDescriptor],
        registry: ConnectorRegistry,
    ) -> Plan:
        self._check_limits(request.limits)
        missing = sorted(set(request.mapped_fields) - set(connections))
        if missing:
            raise EngineError(
                ErrorCategory.NOT_FOUND, f"datasource '{missing[0]}' is not configured"
            )
        return await plan_request(request, connections, registry)

    async def execute(
        self,
        plan: Plan,
        sink: ResultSink,
        *,
        deadline_at: float | None = None,
        on_extracted: Callable[[], None] | None = None,
    ) -> ExtractionResult:
        """Extract every datasource and stream the document to ``sink`` (§4.3 steps 3–5; the
        first datasource streams directly, §4.3.1). ``on_extracted`` runs once extraction and
        sizing are done, before the rest of the document is written."""
        if deadline_at is None:
            deadline_at = _deadline(plan.request)
        return await execute_plan(
            plan,
            self._registry,
            self._spools,
            sink,
            deadline_at=deadline_at,
            on_extracted=on_extracted,
        )

    async def run(
        self,
        request: ExtractionRequest,
        connections: Mapping[str, ConnectionDescriptor],
        sink: ResultSink,
        *,
        on_extracted: Callable[[], None] | None = None,
    ) -> ExtractionResult:
        """Plan and execute under one ``timeoutSeconds`` deadline, each datasource extracted on
        the connection it was planned with (:mod:`fetcher.engine.reuse`); ``on_extracted`` as
        in :meth:`execute`."""
        deadline_at = _deadline(request)
        first = sorted(request.mapped_fields)[: request.limits.max_concurrency]
        keep = [connections[name] for name in first if name in connections]
        async with ReusedConnectors(self._registry, keep) as registry:
            try:
                async with asyncio.timeout_at(deadline_at):
                    with engine_span("plan", {"fetcher.datasource_count": len(connections)}):
                        plan = await self._plan(request, connections, registry)
            except TimeoutError:
                raise EngineError(
                    ErrorCategory.TIMEOUT, "execution exceeded its deadline"
                ) from None
            return await execute_plan(
                plan,
                registry,
                self._spools,
                sink,
                deadline_at=deadline_at,
                on_extracted=on_extracted,
            )

    def _check_limits(self, limits: Limits) -> None:
        for f in fields(Limits):
            if getattr(limits, f.name) > getattr(self._limits, f.name):
                raise EngineError(
                    ErrorCategory.VALIDATION,
                    "limit override exceeds the configured maximum: "
                    f"limits.{_REQUEST_NAMES[f.name]}",
                )


def _deadline(request: ExtractionRequest) -> float:
    return asyncio.get_running_loop().time() + request.limits.timeout_seconds
