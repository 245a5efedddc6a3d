"""The §5.4 bytes a connector's batches make, as the engine's writer writes them: how the
encoder-process tests compare a connector with and without ``BatchEncoder``."""

from __future__ import annotations

from fetcher.engine.document import DatasourceWriter, MemorySpool
from fetcher.engine.ports import Connector, TableQuery
from fetcher.engine.types import TableSchema


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
