"""§13 "Blocking work": SQLite reads run in their own bounded pool, and a cancelled or
timed-out read interrupts its statement so the pool thread is released."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fetcher.adapters.sql import sqlite as sqlite_module
from fetcher.adapters.sql.sqlite import SQLITE_READ_THREADS, SqliteConnector, sqlite_busy_threads
from fetcher.engine.ports import TableQuery
from fetcher.engine.types import Column, DiscoveredSchema, TableSchema, TypeFamily
from tests.sqlite_views import SLOW_SQLITE_VIEW
from tests.unit.sql.helpers import descriptor

#: Generous: an interrupted statement stops within milliseconds.
RELEASE_SECONDS = 5.0


@pytest.fixture
def slow_database(allowed_dir: Path) -> Path:
    path = allowed_dir / "slow.db"
    db = sqlite3.connect(path)
    db.execute(SLOW_SQLITE_VIEW)
    db.commit()
    db.close()
    return path


async def poll(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds within ``RELEASE_SECONDS`` (the pool count is thread state;
    there is no event to await)."""
    deadline = time.monotonic() + RELEASE_SECONDS
    for _ in range(int(RELEASE_SECONDS / 0.01)):
        if condition() or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.01)
    return condition()


async def wait_released() -> None:
    assert await poll(lambda: sqlite_busy_threads() == 0), "a statement kept its pool thread"


async def read_slow(path: Path, allowed: Path, started: asyncio.Event) -> None:
    async with SqliteConnector(descriptor(path), allowed_dir=str(allowed)) as conn:
        found = next(t for t in (await conn.discover([])).tables if t.name == "slow")
        started.set()
        async for _ in conn.stream(TableQuery(found, found.columns, ())):
            pytest.fail("the slow view produced a row")


async def wait_busy() -> None:
    assert await poll(lambda: sqlite_busy_threads() == 1)


async def test_cancelled_read_interrupts_the_statement(
    slow_database: Path, allowed_dir: Path
) -> None:
    started = asyncio.Event()
    task = asyncio.create_task(read_slow(slow_database, allowed_dir, started))
    await started.wait()
    await wait_busy()  # the statement is running in a pool thread
    begun = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, RELEASE_SECONDS)
    assert time.monotonic() - begun < RELEASE_SECONDS
    await wait_released()


async def test_timed_out_read_interrupts_the_statement(
    slow_database: Path, allowed_dir: Path
) -> None:
    started = asyncio.Event()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await read_slow(slow_database, allowed_dir, started)
    assert started.is_set()
    await wait_released()


async def test_reads_run_in_the_sqlite_pool_not_the_default_executor(
    monkeypatch: pytest.MonkeyPatch, database: Path, allowed_dir: Path
) -> None:
    seen: list[str] = []
    real_catalog = sqlite_module._catalog

    def recording(db: sqlite3.Connection) -> list[tuple[str, str, str]]:
        seen.append(threading.current_thread().name)
        return real_catalog(db)

    monkeypatch.setattr(sqlite_module, "_catalog", recording)
    async with SqliteConnector(descriptor(database), allowed_dir=str(allowed_dir)) as conn:
        schema: DiscoveredSchema = await conn.discover([])
    assert schema.tables
    assert seen
    assert seen[0].startswith("fetcher-sqlite")


async def test_the_pool_is_bounded(slow_database: Path, allowed_dir: Path) -> None:
    # More slow reads than threads: never more than SQLITE_READ_THREADS run at once.
    events = [asyncio.Event() for _ in range(SQLITE_READ_THREADS + 2)]
    tasks = [asyncio.create_task(read_slow(slow_database, allowed_dir, event)) for event in events]
    await asyncio.sleep(1.0)
    assert sqlite_busy_threads() == SQLITE_READ_THREADS
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await wait_released()


async def test_a_read_cancelled_before_its_statement_starts_never_runs_it(
    slow_database: Path, allowed_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``interrupt()`` only stops a statement that is running. A pool thread that has taken
    the call but not yet begun the statement when the read is cancelled (a descheduled thread
    under load: seen as a hung suite) must still not run it for ever."""
    started = threading.Event()
    original = sqlite_module._POOL.run

    def late_start(fn: Callable[[], object]) -> object:
        def delayed() -> object:
            started.set()
            time.sleep(0.3)  # the cancellation and its interrupt() land here
            return fn()

        return original(delayed)

    async with SqliteConnector(descriptor(slow_database), allowed_dir=str(allowed_dir)) as conn:
        # The view's one column, as discovery reports it.
        table = TableSchema(
            schema="main", name="slow", columns=(Column("n", TypeFamily.INTEGER, ""),)
        )
        monkeypatch.setattr(sqlite_module._POOL, "run", late_start)
        reader = asyncio.create_task(_first_batch(conn, table))
        assert await poll(started.is_set)
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(reader, RELEASE_SECONDS)
        await wait_released()
        monkeypatch.undo()


async def _first_batch(conn: SqliteConnector, table: TableSchema) -> None:
    async for _ in conn.stream(TableQuery(table, table.columns, ())):
        pytest.fail("the slow view produced a row")


async def test_the_connection_closes_only_after_its_abandoned_call_returns(
    slow_database: Path, allowed_dir: Path
) -> None:
    """A cancelled call keeps running in its pool thread until it returns; closing the
    ``sqlite3`` connection from another thread meanwhile crashed the process (a segmentation
    fault in CI, a discovery still inside ``execute`` while ``close`` ran). The close waits."""
    release = threading.Event()
    returned: list[str] = []

    def stuck_call() -> None:  # stands for a statement that takes a moment to stop
        release.wait(RELEASE_SECONDS)
        returned.append("call returned")

    conn = SqliteConnector(descriptor(slow_database), allowed_dir=str(allowed_dir))
    await conn.__aenter__()
    db = conn._db
    assert db is not None
    call = asyncio.create_task(conn._call(db, None, stuck_call))
    await wait_busy()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    closing = asyncio.create_task(conn.__aexit__(None, None, None))
    await asyncio.sleep(0.2)
    assert not closing.done(), "the connection was closed beside a running call"
    db.execute("SELECT 1")  # still open
    release.set()
    await asyncio.wait_for(closing, RELEASE_SECONDS)
    assert returned == ["call returned"]
    with pytest.raises(sqlite3.ProgrammingError):
        db.execute("SELECT 1")
    await wait_released()
