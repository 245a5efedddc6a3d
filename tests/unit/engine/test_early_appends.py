"""§4.3.1 and issue 23: a spool is appended to the sink, in key order, as soon as its
datasource and every part before it are done, while some datasource still runs; the document
is byte for byte the one written after the whole extraction, and a run that fails afterwards
(its own error, the size limit, the deadline) still fails, leaving the host a prefix to
discard, as direct streaming already does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence

import pytest

from fetcher.engine import ConnectionDescriptor, Engine, EngineError, ErrorCategory, Limits
from fetcher.engine.model import ExtractionRequest
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.testing import FakeConnector, FakeDatabase, FakeRegistry, MemorySink
from fetcher.engine.types import Column, EngineType, TableSchema, TypeFamily

ITEMS = TableSchema(
    "public", "items", (Column("id", TypeFamily.INTEGER), Column("note", TypeFamily.TEXT))
)


def _database(rows: int) -> FakeDatabase:
    database = FakeDatabase(batch_size=10)
    database.add(ITEMS, [{"id": i, "note": f"note {i}"} for i in range(rows)])
    return database


class _Gated(FakeConnector):
    """A fake connector whose stream waits for ``gate`` before its first batch."""

    def __init__(self, connection: ConnectionDescriptor, database: FakeDatabase) -> None:
        super().__init__(connection, database)
        self.gate = asyncio.Event()

    async def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        await self.gate.wait()
        async for batch in super().stream(query):
            yield batch


class _Tracked(FakeConnector):
    """A fake connector that says when it is closed."""

    def __init__(self, connection: ConnectionDescriptor, database: FakeDatabase) -> None:
        super().__init__(connection, database)
        self.closed = asyncio.Event()

    async def __aexit__(self, *exc_info: object) -> None:
        await super().__aexit__(*exc_info)  # type: ignore[arg-type]
        self.closed.set()


class _Registry(FakeRegistry):
    """The fakes, with the datasources named in ``gated`` held back until released."""

    def __init__(self, databases: dict[str, FakeDatabase], gated: Sequence[str] = ()) -> None:
        super().__init__(databases)
        self.gated = {name: _Gated(self._connection(name), databases[name]) for name in gated}
        self.tracked = {
            name: _Tracked(self._connection(name), database)
            for name, database in databases.items()
            if name not in gated
        }

    @staticmethod
    def _connection(name: str) -> ConnectionDescriptor:
        return ConnectionDescriptor(config_name=name, type=EngineType.POSTGRESQL)

    def connector_for(self, connection: ConnectionDescriptor) -> FakeConnector:
        name = connection.config_name
        return self.gated[name] if name in self.gated else self.tracked[name]

    def release(self) -> None:
        for connector in self.gated.values():
            connector.gate.set()


class _Watched(MemorySink):
    """A sink that says when it holds a given text."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    async def write(self, chunk: bytes) -> None:
        await super().write(chunk)
        self.changed.set()

    async def holding(self, text: bytes) -> None:
        while text not in self.data:
            self.changed.clear()
            await self.changed.wait()


def _request(names: Sequence[str], **limits: int) -> ExtractionRequest:
    mapped = {name: {"items": ("id", "note")} for name in names}
    return ExtractionRequest(
        job_id="job-1",
        mapped_fields=mapped,
        limits=Limits(**limits),
    )


def _connections(names: Sequence[str]) -> dict[str, ConnectionDescriptor]:
    return {name: _Registry._connection(name) for name in names}


NAMES = ("a", "b", "c", "d")


async def _reference() -> bytes:
    """The document of the same datasources with nothing held back."""
    sink = MemorySink()
    databases = {name: _database(25) for name in NAMES}
    await Engine(FakeRegistry(databases)).run(_request(NAMES), _connections(NAMES), sink)
    return sink.data


async def test_finished_spools_reach_the_sink_in_key_order_while_others_run() -> None:
    registry = _Registry({name: _database(25) for name in NAMES}, gated=["d"])
    sink = _Watched()
    run = asyncio.create_task(Engine(registry).run(_request(NAMES), _connections(NAMES), sink))
    async with asyncio.timeout(10):
        await sink.holding(b'"note 24"\n      }\n    ]\n  },\n  "c": ')
    assert b'"d": ' not in sink.data  # d still runs: nothing after c yet
    assert not run.done()
    prefix = sink.data
    registry.release()
    result = await run
    assert sink.data == await _reference()
    assert sink.data.startswith(prefix)
    assert result.size_bytes == len(sink.data)
    assert list(json.loads(sink.data)) == list(NAMES)


async def test_a_part_waits_for_every_part_before_it() -> None:
    """b is held back: c and d finish first, but nothing after a reaches the sink before b."""
    registry = _Registry({name: _database(25) for name in NAMES}, gated=["b"])
    sink = _Watched()
    run = asyncio.create_task(Engine(registry).run(_request(NAMES), _connections(NAMES), sink))
    async with asyncio.timeout(10):
        await sink.holding(b'"note 24"\n      }\n    ]\n  }')  # a's value, whole
        await registry.tracked["c"].closed.wait()
        await registry.tracked["d"].closed.wait()
    assert b'"b": ' not in sink.data
    registry.release()
    await run
    assert sink.data == await _reference()


async def test_with_two_datasources_the_second_is_appended_after_the_extraction() -> None:
    names = ("a", "b")
    registry = _Registry({name: _database(25) for name in names}, gated=["b"])
    sink = _Watched()
    engine = Engine(registry)
    run = asyncio.create_task(engine.run(_request(names), _connections(names), sink))
    async with asyncio.timeout(10):
        await sink.holding(b'"note 24"\n      }\n    ]\n  }')
    await asyncio.sleep(0.05)
    assert b'"b": ' not in sink.data
    registry.release()
    await run
    assert list(json.loads(sink.data)) == ["a", "b"]


async def _failure_after_c_is_appended(
    databases: dict[str, FakeDatabase], request: ExtractionRequest
) -> EngineError:
    """Run with d held back until c is in the sink; the run's error."""
    registry = _Registry(databases, gated=["d"])
    sink = _Watched()
    run = asyncio.create_task(Engine(registry).run(request, _connections(NAMES), sink))
    async with asyncio.timeout(10):
        await sink.holding(b'  "c": ')
    registry.release()
    with pytest.raises(EngineError) as caught:
        await run
    return caught.value


async def test_a_failure_after_an_append_still_fails_the_run() -> None:
    databases = {name: _database(25) for name in NAMES}
    databases["d"].fail_on["stream"] = "connection lost"
    error = await _failure_after_c_is_appended(databases, _request(NAMES))
    assert error.category is ErrorCategory.UNAVAILABLE
    assert "'d'" in error.text()


async def test_the_size_limit_still_fails_a_run_whose_first_parts_were_appended() -> None:
    size = len(await _reference())
    databases = {name: _database(25) for name in NAMES}
    error = await _failure_after_c_is_appended(
        databases, _request(NAMES, max_result_bytes=size - 1)
    )
    assert error.category is ErrorCategory.LIMIT_EXCEEDED
    assert error.message.endswith(f"size limit ({size - 1} bytes)")


async def test_the_deadline_still_covers_a_run_whose_first_parts_were_appended() -> None:
    registry = _Registry({name: _database(25) for name in NAMES}, gated=["d"])
    sink = MemorySink()
    with pytest.raises(EngineError) as caught:
        await Engine(registry).run(_request(NAMES, timeout_seconds=1), _connections(NAMES), sink)
    assert caught.value.category is ErrorCategory.TIMEOUT
    assert b'  "c": ' in sink.data  # appended before the deadline, discarded by the host
