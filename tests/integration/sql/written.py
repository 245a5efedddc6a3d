"""The §5.4 bytes a connector's batches make, as the engine's writer writes them: how the
encoder-process tests compare a connector with and without ``BatchEncoder``, and the fast-path
tests a connector's fast path with its general path."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

from fetcher.engine.document import DatasourceWriter, MemorySpool
from fetcher.engine.ports import Connector, Row, TableQuery
from fetcher.engine.types import TableSchema

#: What a connector wrote one way: (document bytes, batch kinds) and the rows it read.
Written = tuple[tuple[bytes, list[str]], list[Row]]


async def document_bytes(connector: Connector, table: TableSchema) -> tuple[bytes, list[str]]:
    """The writer's bytes of every column of ``table``, and the kinds of the batches the
    connector yielded (``FastRowBatch``, ``PreEncodedBatch``, …)."""
    spool = MemorySpool()
    writer = DatasourceWriter(spool)
    kinds = []
    await writer.open_table(table.name)
    async for batch in connector.stream(TableQuery(table, table.columns)):
        kinds.append(type(batch).__name__)
        await writer.write_rows(batch)
    await writer.close_table()
    await writer.close()
    return spool.getvalue(), kinds


async def table_named(connector: Connector, name: str, schemas: Sequence[str]) -> TableSchema:
    """The discovered table ``name``."""
    found = await connector.discover(schemas)
    return next(table for table in found.tables if table.name == name)


async def both_paths(
    connect: Callable[[], AbstractAsyncContextManager[Connector]],
    fast_path: Callable[[bool], None],
    name: str,
    schemas: Sequence[str] = (),
) -> tuple[Written, Written]:
    """What a fresh connector (``connect``) writes and reads for every column of table
    ``name``, with its fast path on (``fast_path(True)``), then off."""
    results = []
    for fast in (True, False):
        fast_path(fast)
        async with connect() as connector:
            table = await table_named(connector, name, schemas)
            written = await document_bytes(connector, table)
            query = TableQuery(table, table.columns)
            rows = [row async for batch in connector.stream(query) for row in batch]
        results.append((written, rows))
    return results[0], results[1]
