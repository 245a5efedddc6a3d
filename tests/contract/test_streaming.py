"""Streaming in batches through a server-side cursor, and cancellation mid-stream (§4.3)."""

from __future__ import annotations

import asyncio

import pytest

from fetcher.engine.ports import TableQuery
from fetcher.engine.types import TableSchema
from tests.batches import narrow_batches
from tests.contract.conftest import Harness
from tests.contract.dataset import BULK, BULK_PAD, BULK_ROWS, ITEM_ROWS, ITEMS, SMALL_BATCH


async def _table(h: Harness, name: str) -> TableSchema:
    scope = [h.loaded.default_schema] if h.loaded.default_schema is not None else []
    async with h.connector() as connector:
        found = await connector.discover(scope)
    return next(t for t in found.tables if t.name == h.engine.catalog_name(name))


async def test_rows_arrive_in_batches_of_the_configured_size(harness: Harness) -> None:
    table = await _table(harness, ITEMS)
    sizes: list[int] = []
    async with harness.connector(batch_size=SMALL_BATCH) as connector:
        async for batch in connector.stream(TableQuery(table, table.columns)):
            sizes.append(len(batch))
    assert sizes == narrow_batches(ITEM_ROWS, SMALL_BATCH)
    assert max(sizes) == SMALL_BATCH


async def test_a_large_table_streams_through_a_server_side_cursor(harness: Harness) -> None:
    """While the stream is paused after its first batch, another session sees the query still
    open on the server (the plugin's check); then the rest arrives intact, in batches of at
    most ``batch_size`` rows, the first one small (sized by bytes from then on)."""
    table = await _table(harness, BULK)
    total = 0
    sizes: list[int] = []
    async with harness.connector(batch_size=500) as connector:
        stream = connector.stream(TableQuery(table, table.columns))
        async for batch in stream:
            if not sizes:
                # The consumer is busy elsewhere: the event loop is free to read the socket.
                await asyncio.sleep(0.5)
                await harness.engine.assert_streaming(harness.loaded)
            sizes.append(len(batch))
            total += len(batch)
            assert all(len(str(row[table.columns[1].name])) == BULK_PAD for row in batch)
    assert total == BULK_ROWS
    assert sizes == narrow_batches(BULK_ROWS, 500)


async def _sessions_settle(h: Harness, want: int) -> int | None:
    """The reader's session count, polled until it equals ``want`` (or 10 s pass)."""
    count = await h.engine.open_sessions(h.loaded)
    for _ in range(100):
        if count is None or count == want:
            return count
        await asyncio.sleep(0.1)
        count = await h.engine.open_sessions(h.loaded)
    return count


async def test_cancellation_mid_stream_releases_the_connection(harness: Harness) -> None:
    table = await _table(harness, BULK)
    baseline = await _sessions_settle(harness, 0)
    first_batch = asyncio.Event()

    async def consume() -> None:
        async with harness.connector(batch_size=100) as connector:
            async for _batch in connector.stream(TableQuery(table, table.columns)):
                first_batch.set()
                await asyncio.sleep(0.05)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_batch.wait(), 10)
    if baseline is not None:
        assert await harness.engine.open_sessions(harness.loaded) == baseline + 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    if baseline is not None:
        assert await _sessions_settle(harness, baseline) == baseline
    # The data stays readable: nothing was left locked or half-open.
    async with harness.connector() as connector:
        count = 0
        async for batch in connector.stream(TableQuery(table, table.columns[:1])):
            count += len(batch)
    assert count == BULK_ROWS
