"""Execution: the fail-fast, bounded-concurrency runner (contract §4.3 steps 3–5, §5.5).

Datasources run concurrently up to ``maxConcurrency``; the tables of one datasource run one
after another on one connection, in result-key order, each table's rows streaming as they
arrive. The first failing datasource cancels the rest.

§4.3.1 Direct streaming: the first datasource in key order streams straight into the sink
(after the document's head), so the host's encryption and upload overlap the extraction; the
others go to their spools. Each spool is appended to the sink, in key order, as soon as its
datasource and every part before it are done: while other datasources still run, inside the
extraction (so its encryption and upload overlap them too), else after it. The running byte
counts (the streamed part's and the spools') still give the exact document size,
so ``maxResultBytes`` fails the run as soon as it is proven exceeded. A run that raises has
therefore possibly written a prefix of the document to the sink: the host MUST discard it (abort
the multipart upload, remove the temporary file), as it already must for a failing sink.

A value nested deeper than ``MAX_JSON_DEPTH`` fails its datasource with the §4.5 query text,
``failed to query datasource '<ds>': column '<c>' of table '<t>' holds a JSON value nested
deeper than <N> levels``: connectors raise it so themselves when their parser or value encoder
meets such a value; when the document writer refuses one (or a connector let the engine's
:class:`~fetcher.engine.errors.JsonDepthError` through), it is turned into that text here.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from fetcher.engine.document import (
    DatasourceWriter,
    document_head,
    document_size,
    write_document,
    write_part,
)
from fetcher.engine.errors import EngineError, ErrorCategory, JsonDepthError
from fetcher.engine.model import ExtractionResult
from fetcher.engine.planner import DatasourcePlan, Plan
from fetcher.engine.ports import ConnectorRegistry, ResultSink, Spool, SpoolFactory
from fetcher.engine.spans import DB_SYSTEM, engine_span

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


class _DirectSpool:
    """§4.3.1 Direct streaming: a ``Spool`` whose bytes go straight to the sink, after the
    document head (written with the first bytes, so a run that fails before producing any never
    opens the upload). Its ``size`` is the datasource value's byte count, like a spool's."""

    def __init__(self, sink: ResultSink, head: bytes) -> None:
        self._sink = sink
        self._head: bytes | None = head
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    async def write(self, data: bytes) -> None:
        head, self._head = self._head, None
        self._size += len(data)
        if head is not None:  # a write of its own: ``head + data`` would copy the data
            await self._sink.write(head)
        await self._sink.write(data)

    async def read(self) -> AsyncIterator[bytes]:
        """Nothing: the bytes are in the sink already (``write_document(start=1)``)."""
        nothing: tuple[bytes, ...] = ()
        for chunk in nothing:
            yield chunk

    async def close(self) -> None:
        """Holds nothing."""


async def extract_to_spools(
    plan: Plan,
    registry: ConnectorRegistry,
    spools: SpoolFactory,
    stack: AsyncExitStack,
    direct: ResultSink | None = None,
) -> tuple[list[tuple[str, Spool]], dict[str, dict[str, int]], int]:
    """Run every datasource into its own spool; return the spools in key order, the row count,
    and how many parts (in key order) are in ``direct`` already. The counts are
    ``{datasource: {tableKey: rows}}`` in key order. Spools are closed by ``stack``
    on every exit path (the caller owns it).

    With ``direct``, the first datasource streams into that sink instead (§4.3.1): its entry
    in the result is a spool that holds nothing. Then, while later datasources still run, each
    finished spool that comes next in key order is appended to ``direct`` as well
    (:func:`~fetcher.engine.document.write_part`), so its encryption and upload overlap the
    extraction left; what remains once every datasource is done is the caller's
    (``write_document(start=...)``)."""
    parts: list[_Part] = []
    for index, datasource in enumerate(plan.datasources):
        if direct is not None and index == 0:
            spool: Spool = _DirectSpool(direct, document_head(datasource.name))
        else:
            spool = spools.create()
            stack.push_async_callback(spool.close)
        parts.append(_Part(datasource.name, spool, DatasourceWriter(spool)))
    guard = _SizeGuard(parts, plan.request.limits.max_result_bytes)
    gate = asyncio.Semaphore(plan.request.limits.max_concurrency)
    finished = [asyncio.Event() for _ in parts]
    appended = _Appended(1 if direct is not None else 0)

    async def run(index: int, datasource: DatasourcePlan) -> None:
        async with gate:
            await _extract_datasource(datasource, parts[index].writer, registry, guard)
        finished[index].set()

    try:
        async with asyncio.TaskGroup() as group:
            for index, datasource in enumerate(plan.datasources):
                group.create_task(run(index, datasource))
            if direct is not None and len(parts) > 2:  # with two, nothing is left to overlap
                group.create_task(_append_finished(parts, finished, direct, appended))
    except BaseExceptionGroup as group_error:
        raise _first_engine_error(group_error) from None
    size = document_size([(p.name, p.spool.size) for p in parts])
    if size > plan.request.limits.max_result_bytes:
        raise size_limit_error(plan.request.limits.max_result_bytes)
    counts = {p.name: p.writer.table_rows for p in parts}
    return [(p.name, p.spool) for p in parts], counts, appended.count


@dataclass
class _Appended:
    """How many parts, in key order, are in the direct sink."""

    count: int


async def _append_finished(
    parts: Sequence[_Part],
    finished: Sequence[asyncio.Event],
    sink: ResultSink,
    appended: _Appended,
) -> None:
    """Append the spools after the streamed part to ``sink`` in key order, each as soon as its
    datasource and every part before it are done, while some datasource still runs (then the
    rest is the caller's, outside the extraction's deadline). A failing sink fails the run, as
    it does for the streamed part."""
    await finished[0].wait()
    while appended.count < len(parts):
        part = parts[appended.count]
        await finished[appended.count].wait()
        if all(event.is_set() for event in finished):
            return
        await write_part(sink, appended.count, part.name, part.spool)
        await part.spool.close()  # its bytes are in the sink: its memory or disk is free now
        appended.count += 1


async def _extract_datasource(
    datasource: DatasourcePlan,
    writer: DatasourceWriter,
    registry: ConnectorRegistry,
    guard: _SizeGuard,
) -> None:
    attributes: dict[str, str | int] = {
        "db.system": DB_SYSTEM[datasource.connection.type],
        "fetcher.datasource": datasource.name,
        "fetcher.table_count": len(datasource.tables),
    }
    with engine_span(f"extract {datasource.name}", attributes) as span:
        async with registry.connector_for(datasource.connection) as connector:
            for table in datasource.tables:
                await writer.open_table(table.key)
                try:
                    async for batch in connector.stream(table.query):
                        await writer.write_rows(batch)
                        del batch  # written: not held while the connector makes the next
                        guard.check()
                except JsonDepthError as exc:  # the writer refused a value (see the module)
                    located = exc.located(table=table.query.table.label)
                    raise located.query_error(datasource.name) from None
                await writer.close_table()
        await writer.close()
        span.set_attribute("fetcher.row_count", writer.row_count)


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
    on_extracted: Callable[[], None] | None = None,
) -> ExtractionResult:
    """Extract before ``deadline_at`` (event-loop time; §3.5 ``timeoutSeconds``), the first
    datasource streaming into ``sink`` meanwhile (§4.3.1) and finished spools appended while
    others still run, then append the rest. The deadline covers extraction and sizing (and the
    appends made during extraction); ``on_extracted`` is called when they are done, before the
    rest of the document goes to the sink (the host's storage clock, §4.3 steps 5–6)."""
    hashing = _HashingSink(sink)
    direct = hashing if plan.datasources else None
    async with AsyncExitStack() as stack:
        try:
            async with asyncio.timeout_at(deadline_at):
                parts, counts, appended = await extract_to_spools(
                    plan, registry, spools, stack, direct
                )
        except TimeoutError:
            raise EngineError(ErrorCategory.TIMEOUT, "execution exceeded its deadline") from None
        if on_extracted is not None:
            on_extracted()
        await write_document(parts, hashing, start=appended)
        rows = sum(n for tables in counts.values() for n in tables.values())
        return ExtractionResult(rows, hashing.size, hashing.sha256.hexdigest(), counts)
