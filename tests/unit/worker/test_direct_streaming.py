"""§4.3.1 Direct streaming in the Worker: the first datasource in key order goes straight into
the encrypting upload while it extracts; every failure after the upload has started leaves no
object (§4.3 step 5, §5.5), and the storage clock starts only when extraction ends (§4.3).

The object store is the real local store behind a recorder (what was written, and whether the
writer committed or was discarded); the datasources are the engine's fakes, with a connector
that counts its batches and can fail after a given number of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from fetcher.adapters.spool import EncryptedSpoolFactory
from fetcher.crypto import decrypt_object, hmac_hex
from fetcher.engine import Engine
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.model import ConnectionDescriptor
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.testing import FakeConnector, FakeDatabase
from fetcher.engine.types import Column, EngineType, TableSchema, TypeFamily
from fetcher.services.infrastructure import ObjectWriter
from fetcher.services.jobs.extraction import ExtractionService
from fetcher.services.timeutil import SystemClock
from tests.unit.worker.conftest import World

WIDE = TableSchema(
    "public", "wide", (Column("id", TypeFamily.INTEGER), Column("note", TypeFamily.TEXT))
)
BATCHES = 30
BATCH_ROWS = 200  # about 50 KB of document a batch: the writer flushes every second batch
NOTE = "n" * 220


class _Counted(FakeConnector):
    """A fake connector that records how many batches it yielded, and can fail mid-stream."""

    def __init__(self, connection: ConnectionDescriptor, source: _Source) -> None:
        super().__init__(connection, source.database)
        self._source = source

    async def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        async for batch in super().stream(query):
            if self._source.fail_after == self._source.yielded:
                raise EngineError(
                    ErrorCategory.UNAVAILABLE,
                    f"failed to query datasource '{self._source.name}'",
                    detail="connection lost",
                )
            self._source.yielded += 1
            yield batch


@dataclasses.dataclass
class _Source:
    name: str
    database: FakeDatabase
    fail_after: int | None = None
    yielded: int = 0


class _Registry:
    def __init__(self, *sources: _Source) -> None:
        self.sources = {s.name: s for s in sources}

    def connector_for(self, connection: ConnectionDescriptor) -> _Counted:
        return _Counted(connection, self.sources[connection.config_name])


def _source(name: str, *, delay: float = 0.0, fail_after: int | None = None) -> _Source:
    database = FakeDatabase(batch_size=BATCH_ROWS, delay=delay)
    database.add(WIDE, [{"id": i, "note": NOTE} for i in range(BATCHES * BATCH_ROWS)])
    return _Source(name, database, fail_after)


class _Recording:
    """The local object store, recording each writer's fate and what the sources had yielded
    when the first stored byte arrived. ``fail_at`` makes the n-th write a storage failure."""

    def __init__(self, inner: Any, registry: _Registry, fail_at: int | None = None) -> None:
        self.inner = inner
        self.registry = registry
        self.fail_at = fail_at
        self.writes = 0
        self.yielded_at_first_write: dict[str, int] | None = None
        self.first_write = asyncio.Event()
        self.outcome: str | None = None

    @asynccontextmanager
    async def open_writer(self, key: str) -> AsyncIterator[ObjectWriter]:
        async with self.inner.open_writer(key) as writer:
            recording = self

            class _Writer:
                async def write(self, chunk: bytes) -> None:
                    recording.writes += 1
                    if recording.writes == recording.fail_at:
                        raise EngineError(
                            ErrorCategory.UNAVAILABLE,
                            "failed to store result",
                            detail="connection reset",
                        )
                    if recording.yielded_at_first_write is None:
                        recording.yielded_at_first_write = {
                            n: s.yielded for n, s in recording.registry.sources.items()
                        }
                        recording.first_write.set()
                    await writer.write(chunk)

            try:
                yield _Writer()
            except BaseException:
                self.outcome = "discarded"
                raise
            self.outcome = "committed"

    async def read(self, key: str) -> bytes:
        data: bytes = await self.inner.read(key)
        return data

    async def exists(self, key: str) -> bool:
        found: bool = await self.inner.exists(key)
        return found

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def size(self, key: str) -> int:
        found: int = await self.inner.size(key)
        return found

    async def read_range(self, key: str, start: int, end: int) -> AsyncIterator[bytes]:
        async for chunk in self.inner.read_range(key, start, end):
            yield chunk

    async def check(self) -> None:
        await self.inner.check()


def _service(
    world: World, tmp_path: Path, registry: _Registry, **overrides: Any
) -> tuple[ExtractionService, _Recording]:
    base = world.extraction
    engine = Engine(
        registry,
        limits=base.engine.limits,
        spools=EncryptedSpoolFactory(64 * 1024, str(tmp_path / "spools")),
    )
    recording = _Recording(world.objects, registry, overrides.pop("fail_at", None))
    internal = {  # §9.4: internal datasources, so the Manager side needs no live test
        name: ConnectionDescriptor(name, EngineType.POSTGRESQL, database="x", internal=True)
        for name in registry.sources
    }
    world.jobs.directory.internal = internal
    service = dataclasses.replace(
        base, engine=engine, objects=recording, internal=internal, **overrides
    )
    return service, recording


async def _claimed_job(world: World, names: Sequence[str], **extra: object) -> str:
    mapped = {name: {"public.wide": ["id", "note"]} for name in names}
    job_id = await world.submit(mapped, **extra)
    assert await world.store.claim_job(job_id, SystemClock().now())
    return job_id


async def _assert_no_object(world: World, recording: _Recording, job_id: str) -> None:
    assert recording.writes > 0  # the upload had started: it is the abort that is tested
    assert recording.outcome == "discarded"
    assert not await world.objects.exists(f"external-data/{job_id}.json")
    leftovers = [p for p in world.objects.root.rglob("*") if p.is_file()]
    assert leftovers == []  # no temporary file either


async def _error(world: World, job_id: str) -> str | None:
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    return job.error


async def test_the_first_datasource_uploads_while_it_extracts(world: World, tmp_path: Path) -> None:
    registry = _Registry(_source("a", delay=0.001), _source("b", delay=0.001))
    service, recording = _service(world, tmp_path, registry)
    job_id = await _claimed_job(world, ["b", "a"])
    assert await service.run_claimed(job_id) == "completed"
    assert recording.outcome == "committed"
    assert recording.yielded_at_first_write is not None
    assert recording.yielded_at_first_write["a"] < BATCHES  # "a" was still extracting
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.result_path is not None
    plaintext = decrypt_object(world.keys.storage, await world.objects.read(job.result_path))
    rows = [{"id": i, "note": NOTE} for i in range(BATCHES * BATCH_ROWS)]
    assert json.loads(plaintext) == {"a": {"wide": rows}, "b": {"wide": rows}}
    assert hmac_hex(world.keys.external_hmac, plaintext) == job.result_hmac
    # §5.4 layout, byte for byte: the streamed part and the appended spool join exactly
    assert plaintext.startswith(b'{\n  "a": {\n    "wide": [\n      {\n        "id": 0,')
    assert b'\n    ]\n  },\n  "b": {\n    "wide": [\n' in plaintext
    assert plaintext.endswith(b'"\n      }\n    ]\n  }\n}')


async def test_the_size_limit_mid_stream_aborts_the_upload(world: World, tmp_path: Path) -> None:
    registry = _Registry(_source("a"))
    service, recording = _service(world, tmp_path, registry)
    job_id = await _claimed_job(world, ["a"], limits={"maxResultBytes": 400_000})
    assert await service.run_claimed(job_id) == "failed"
    assert await _error(world, job_id) == (
        "extraction result exceeds the configured size limit (400000 bytes)"
    )
    assert registry.sources["a"].yielded < BATCHES  # stopped as soon as the limit was proven
    await _assert_no_object(world, recording, job_id)


async def test_the_streamed_datasource_failing_mid_stream_aborts_the_upload(
    world: World, tmp_path: Path
) -> None:
    registry = _Registry(_source("a", fail_after=10), _source("b", delay=0.01))
    service, recording = _service(world, tmp_path, registry)
    job_id = await _claimed_job(world, ["a", "b"])
    assert await service.run_claimed(job_id) == "failed"
    assert await _error(world, job_id) == "failed to query datasource 'a': connection lost"
    assert registry.sources["b"].yielded < BATCHES  # fail-fast cancelled the other one
    await _assert_no_object(world, recording, job_id)


async def test_another_datasource_failing_cancels_the_stream_and_aborts_the_upload(
    world: World, tmp_path: Path
) -> None:
    registry = _Registry(_source("a", delay=0.01), _source("b", delay=0.02, fail_after=10))
    service, recording = _service(world, tmp_path, registry)
    job_id = await _claimed_job(world, ["a", "b"])
    assert await service.run_claimed(job_id) == "failed"
    assert await _error(world, job_id) == "failed to query datasource 'b': connection lost"
    assert registry.sources["a"].yielded < BATCHES
    await _assert_no_object(world, recording, job_id)


async def test_the_deadline_mid_stream_aborts_the_upload(world: World, tmp_path: Path) -> None:
    registry = _Registry(_source("a", delay=0.05))  # 30 batches: 1.5 s
    service, recording = _service(world, tmp_path, registry)
    job_id = await _claimed_job(world, ["a"], limits={"timeoutSeconds": 1})
    assert await service.run_claimed(job_id) == "failed"
    assert await _error(world, job_id) == "execution exceeded its deadline"
    await _assert_no_object(world, recording, job_id)


async def test_cancellation_mid_stream_aborts_the_upload(world: World, tmp_path: Path) -> None:
    registry = _Registry(_source("a", delay=0.02))
    service, recording = _service(world, tmp_path, registry)
    job_id = await _claimed_job(world, ["a"])
    task = asyncio.create_task(service.run_claimed(job_id))
    await asyncio.wait_for(recording.first_write.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert registry.sources["a"].yielded < BATCHES
    await _assert_no_object(world, recording, job_id)


async def test_a_storage_failure_mid_stream_fails_fast_and_aborts_the_upload(
    world: World, tmp_path: Path
) -> None:
    registry = _Registry(_source("a", delay=0.01), _source("b", delay=0.01))
    service, recording = _service(world, tmp_path, registry, fail_at=3)
    job_id = await _claimed_job(world, ["a", "b"])
    assert await service.run_claimed(job_id) == "failed"
    assert await _error(world, job_id) == "failed to store result: connection reset"
    assert registry.sources["a"].yielded < BATCHES  # extraction stopped with the upload
    assert registry.sources["b"].yielded < BATCHES
    await _assert_no_object(world, recording, job_id)


async def test_the_storage_clock_starts_when_extraction_ends(world: World, tmp_path: Path) -> None:
    """§4.3: ``STORAGE_TIMEOUT_SECONDS`` bounds steps 5–6 only. The upload opens during the
    extraction (direct streaming), which here lasts longer than the storage timeout."""
    registry = _Registry(_source("a", delay=0.04))  # about 1.2 s of extraction
    service, recording = _service(world, tmp_path, registry, storage_timeout=0.5)
    job_id = await _claimed_job(world, ["a"])
    assert await service.run_claimed(job_id) == "completed"
    assert recording.yielded_at_first_write is not None
    assert recording.yielded_at_first_write["a"] < BATCHES // 2  # opened early in extraction
    assert recording.outcome == "committed"
