"""``open_result_sync``: :func:`~fetcher.consumer.result.open_result` for code without asyncio.

The kit's one implementation is async (object stores are read with async clients); this
function runs it to completion on a private event loop and returns the same
:class:`~fetcher.consumer.result.VerifiedResult`, whose reading (``rows()``, ``tables()``,
``write_to()``) is synchronous already::

    keys = ConsumerKeys.from_hex(external=EXTERNAL_HEX, storage=STORAGE_HEX)
    with open_result_sync(job, LocalFolderSource("/var/lib/fetcher/objects"), keys) as result:
        for datasource, table, row in result.rows(): ...

An :class:`~fetcher.consumer.stores.S3Source` is passed **not** opened: this call opens it on
its loop and closes it before returning (an async client belongs to the loop that opened it).
Called where an event loop is already running, it raises ``RuntimeError`` (``await
open_result(...)`` is the form to use there) instead of blocking that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from fetcher.consumer.events import JobCompleted
from fetcher.consumer.keys import ConsumerKeys
from fetcher.consumer.result import ProgressCallback, ResultRef, VerifiedResult, open_result
from fetcher.consumer.stores import ObjectSource, S3Source

__all__ = ["open_result_sync"]


def open_result_sync(
    result: ResultRef | JobCompleted | Mapping[str, Any],
    source: ObjectSource | S3Source,
    keys: ConsumerKeys,
    *,
    spool_dir: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> VerifiedResult:
    """As :func:`~fetcher.consumer.result.open_result` (same arguments, checks, errors and
    result), without ``await`` (module docstring)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "open_result_sync() was called inside a running event loop: use "
            "'await open_result(...)' there"
        )

    async def opened() -> VerifiedResult:
        if isinstance(source, S3Source):
            async with source as s3:
                return await open_result(
                    result, s3, keys, spool_dir=spool_dir, on_progress=on_progress
                )
        return await open_result(result, source, keys, spool_dir=spool_dir, on_progress=on_progress)

    return asyncio.run(opened())
