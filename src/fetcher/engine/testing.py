"""Public in-memory fakes of every engine port, for tests and for anyone embedding the engine.

``FakeDatabase`` holds tables and rows; ``FakeConnector`` serves them through the Connector
protocol, evaluating bound filters with the SQL semantics of §3.4 (three-valued logic: ``ne``,
``nin``, ``gt`` … never match NULL), so the runner can be tested without a server. Failures
are injected per stage to exercise fail-fast paths.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Self

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import BoundCondition, BoundFieldFilter, Operator
from fetcher.engine.model import ConnectionDescriptor
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.spool import MemorySpool, MemorySpoolFactory
from fetcher.engine.types import DiscoveredSchema, TableSchema

__all__ = [
    "FakeConnector",
    "FakeDatabase",
    "FakeRegistry",
    "FixedClock",
    "MemorySink",
    "MemorySpool",
    "MemorySpoolFactory",
]


@dataclass
class FakeDatabase:
    """Tables and their rows (each row keyed by catalog column name).

    ``fail_on`` maps a stage (``connect``, ``discover``, ``stream``) to the detail text of an
    error to raise there; ``delay`` sleeps before every batch (for timeout and cancellation
    tests); ``batch_size`` splits rows into batches.
    """

    default_schema: str = "public"
    tables: dict[TableSchema, list[Row]] = field(default_factory=dict)
    fail_on: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    batch_size: int = 1000
    opened: int = 0
    closed: int = 0
    streamed: list[str] = field(default_factory=list)

    def add(self, table: TableSchema, rows: Iterable[Row] = ()) -> None:
        self.tables[table] = list(rows)


class FakeConnector:
    """The Connector protocol over a :class:`FakeDatabase`."""

    def __init__(self, connection: ConnectionDescriptor, database: FakeDatabase) -> None:
        self._name = connection.config_name
        self._db = database
        self._open = False

    async def __aenter__(self) -> Self:
        self._fail("connect", ErrorCategory.CONNECT, "failed to connect to datasource")
        self._db.opened += 1
        self._open = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._open:
            self._open = False
            self._db.closed += 1

    async def probe(self) -> None:
        self._fail("probe", ErrorCategory.CONNECT, "failed to connect to datasource")

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        self._fail("discover", ErrorCategory.UNAVAILABLE, "failed to discover datasource schema")
        scope = set(schemas)
        tables = tuple(t for t in self._db.tables if not scope or t.schema in scope)
        return DiscoveredSchema(default_schema=self._db.default_schema, tables=tables)

    async def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        self._db.streamed.append(query.table.name)
        rows = [r for r in self._db.tables[query.table] if _matches(r, query.filters)]
        names = [c.name for c in query.columns]
        for start in range(0, max(len(rows), 1), self._db.batch_size):
            if self._db.delay:
                await asyncio.sleep(self._db.delay)
            self._fail("stream", ErrorCategory.UNAVAILABLE, "failed to query datasource")
            batch = rows[start : start + self._db.batch_size]
            if batch:
                yield [{n: r.get(n) for n in names} for r in batch]

    def _fail(self, stage: str, category: ErrorCategory, message: str) -> None:
        detail = self._db.fail_on.get(stage)
        if detail is not None:
            raise EngineError(category, f"{message} '{self._name}'", detail=detail)


class FakeRegistry:
    """The ConnectorRegistry protocol: one :class:`FakeDatabase` per ``configName``."""

    def __init__(self, databases: Mapping[str, FakeDatabase]) -> None:
        self.databases = dict(databases)

    def connector_for(self, connection: ConnectionDescriptor) -> FakeConnector:
        return FakeConnector(connection, self.databases[connection.config_name])


class MemorySink:
    """The ResultSink protocol, collecting every chunk."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def write(self, chunk: bytes) -> None:
        self.chunks.append(bytes(chunk))

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)


@dataclass
class FixedClock:
    """The Clock protocol with a settable time."""

    current: datetime = field(default_factory=lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    ticks: float = 0.0

    def now(self) -> datetime:
        return self.current

    def monotonic(self) -> float:
        return self.ticks


def _matches(row: Row, filters: Sequence[BoundFieldFilter]) -> bool:
    return all(
        _holds(row.get(f.column.name), condition) for f in filters for condition in f.conditions
    )


def _holds(value: object, condition: BoundCondition) -> bool:
    op, values = condition.op, condition.values
    non_null = [v for v in values if v is not None]
    if op in (Operator.EQ, Operator.IN):
        return (value is None and None in values) or (value is not None and value in non_null)
    if value is None:
        return False
    if op in (Operator.NE, Operator.NIN):
        return value not in non_null
    return _COMPARE[op](value, condition)


def _compare(check: Callable[[object, object], bool]) -> Callable[[object, BoundCondition], bool]:
    return lambda value, condition: check(value, condition.values[0])


def _between(value: object, condition: BoundCondition) -> bool:
    low, high = condition.values
    upper = value < high if condition.upper_exclusive else value <= high  # type: ignore[operator]
    return bool(value >= low and upper)  # type: ignore[operator]


def _like(value: object, condition: BoundCondition) -> bool:
    pattern = str(condition.values[0])
    regex = ""
    escaped = False
    for char in pattern:
        if escaped:
            regex += re.escape(char)
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            regex += {"%": ".*", "_": "."}.get(char, re.escape(char))
    return re.fullmatch(regex, str(value), re.DOTALL) is not None


_COMPARE: dict[Operator, Callable[[object, BoundCondition], bool]] = {
    Operator.GT: _compare(lambda a, b: a > b),  # type: ignore[operator]
    Operator.GTE: _compare(lambda a, b: a >= b),  # type: ignore[operator]
    Operator.LT: _compare(lambda a, b: a < b),  # type: ignore[operator]
    Operator.LTE: _compare(lambda a, b: a <= b),  # type: ignore[operator]
    Operator.BETWEEN: _between,
    Operator.LIKE: _like,
}
