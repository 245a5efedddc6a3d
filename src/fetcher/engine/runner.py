"""Execution: the fail-fast, bounded-concurrency runner (contract §4.3 steps 3–5, §5.5).

Datasources run concurrently up to ``maxConcurrency``; the tables of one datasource run one
after another on one connection, in result-key order, each table's rows streaming into that
datasource's spool as they arrive. The first failing datasource cancels the rest. The spools'
running byte counts give the document size, so ``maxResultBytes`` is enforced before a single
byte reaches the sink; the document is then streamed to the sink in key order.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from fetcher.engine.document import DatasourceWriter, document_size, write_document
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.model import ExtractionResult
from fetcher.engine.planner import DatasourcePlan, Plan
from fetcher.engine.ports import ConnectorRegistry, ResultSink, Spool, SpoolFactory

__all__ = ["execute_plan", "extract_to_spools", "size_limit_error"]


def size_limit_error(limit: int) -> EngineError:
    return EngineError(
        ErrorCategory.LIMIT_EXCEEDED,
        f"extraction result exceeds the configured size limit ({limit} bytes)",
    )


@dataclass(slots=True)
class _Part:
    name: str
    spool: Spool
    writer: DatasourceWriter


class _SizeGuard:
    """Fails the run as soon as the bytes written so far prove the limit will be exceeded."""

    def __init__(self, parts: Sequence[_Part], limit: int) -> None:
        self._parts = parts
        self._limit = limit

    def check(self) -> None:
        written = document_size([(p.name, p.writer.bytes_written) for p in self._parts])
        if written > self._limit:
            raise size_limit_error(self._limit)


async def extract_to_spools(
    plan: Plan, registry: ConnectorRegistry, spools: SpoolFactory, stack: AsyncExitStack
) -> tuple[list[tuple[str, Spool]], int]:
    """Run every datasource into its own spool; return the spools in key order and the row
    count. Spools are closed by ``stack`` on every exit path (the caller owns it)."""
    parts: list[_Part] = []
    for datasource in plan.datasources:
        spool = spools.create()
        stack.push_async_callback(spool.close)
        parts.append(_Part(datasource.name, spool, DatasourceWriter(spool)))
    guard = _SizeGuard(parts, plan.request.limits.max_result_bytes)
    gate = asyncio.Semaphore(plan.request.limits.max_concurrency)

    async def run(datasource: DatasourcePlan, part: _Part) -> None:
        async with gate:
            await _extract_datasource(datasource, part.writer, registry, guard)

    try:
        async with asyncio.TaskGroup() as group:
            for datasource, part in zip(plan.datasources, parts, strict=True):
                group.create_task(run(datasource, part))
    except BaseExceptionGroup as group_error:
        raise _first_engine_error(group_error) from None
    size = document_size([(p.name, p.spool.size) for p in parts])
    if size > plan.request.limits.max_result_bytes:
        raise size_limit_error(plan.request.limits.max_result_bytes)
    return [(p.name, p.spool) for p in parts], sum(p.writer.row_count for p in parts)


async def _extract_datasource(
    datasource: DatasourcePlan,
    writer: DatasourceWriter,
    registry: ConnectorRegistry,
    guard: _SizeGuard,
) -> None:
    async with registry.connector_for(datasource.connection) as connector:
        for table in datasource.tables:
            await writer.open_table(table.key)
            async for batch in connector.stream(table.query):
                await writer.write_rows(batch)
                guard.check()
            await writer.close_table()
    await writer.close()


def _first_engine_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """Fail-fast reports one execution error (which one is unspecified, §4.3 step 3)."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_engine_error(exc)
        if isinstance(exc, EngineError):
            return exc
    return group.exceptions[0]


class _HashingSink:
    """Counts and hashes what goes to the real sink, so the result reports both."""

    def __init__(self, sink: ResultSink) -> None:
        self._sink = sink
        self.sha256 = hashlib.sha256()
        self.size = 0

    async def write(self, chunk: bytes) -> None:
        self.sha256.update(chunk)
        self.size += len(chunk)
        await self._sink.write(chunk)


async def execute_plan(
    plan: Plan,
    registry: ConnectorRegistry,
    spools: SpoolFactory,
    sink: ResultSink,
    *,
    deadline_at: float | None = None,
) -> ExtractionResult:
    """Extract before ``deadline_at`` (event-loop time; §3.5 ``timeoutSeconds``), then stream
    the document to ``sink``. The deadline covers extraction and sizing, not the sink (§4.3)."""
    async with AsyncExitStack() as stack:
        try:
            async with asyncio.timeout_at(deadline_at):
                parts, rows = await extract_to_spools(plan, registry, spools, stack)
        except TimeoutError:
            raise EngineError(ErrorCategory.TIMEOUT, "execution exceeded its deadline") from None
        hashing = _HashingSink(sink)
        await write_document(parts, hashing)
        return ExtractionResult(rows, hashing.size, hashing.sha256.hexdigest())
