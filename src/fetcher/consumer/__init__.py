"""Fetcher's consumer kit: verify job events, deduplicate them, open their results.

Public, typed, and a leaf: it imports only the standard library and :mod:`fetcher.crypto`
(object storage and PostgreSQL behind the ``s3`` and ``postgres`` extras, imported lazily), so
a consumer can depend on it without the server.

::

    keys = ConsumerKeys.from_hex(external=EXTERNAL_HEX, storage=STORAGE_HEX)
    with open_result_sync(job, LocalFolderSource(objects_dir), keys) as result:  # no asyncio
        for datasource, table, row in result.rows(): ...
    # or, in async code, from a verified event:
    event = verify_event(headers, body, exchange=ex, routing_key=rk, keys=keys)
    if isinstance(event, JobCompleted) and await dedup.claim(event.ce_id):
        async with S3Source(bucket, endpoint_url=url) as s3:
            with await open_result(event, s3, keys) as result:
                for datasource, table, row in result.rows(): ...
"""

from fetcher.consumer import errors
from fetcher.consumer.blocking import open_result_sync
from fetcher.consumer.dedup import Deduplicator, MemoryDeduplicator, PostgresDeduplicator
from fetcher.consumer.errors import *  # noqa: F403 - the closed error taxonomy, errors.__all__
from fetcher.consumer.events import (
    Envelope,
    Integrity,
    JobCompleted,
    JobEvent,
    JobFailed,
    Protection,
    ResultInfo,
    event_from_feed_item,
    verify_event,
)
from fetcher.consumer.keys import SINGLE_TENANT, ConsumerKeys
from fetcher.consumer.result import ResultRef, ResultTable, VerifiedResult, open_result
from fetcher.consumer.stores import LocalFolderSource, ObjectSource, S3Source

__all__ = [
    # keys
    "SINGLE_TENANT",
    "ConsumerKeys",
    # events
    "Envelope",
    "Integrity",
    "JobCompleted",
    "JobEvent",
    "JobFailed",
    "Protection",
    "ResultInfo",
    "event_from_feed_item",
    "verify_event",
    # deduplication
    "Deduplicator",
    "MemoryDeduplicator",
    "PostgresDeduplicator",
    # results
    "LocalFolderSource",
    "ObjectSource",
    "ResultRef",
    "ResultTable",
    "S3Source",
    "VerifiedResult",
    "open_result",
    "open_result_sync",
]
__all__ += errors.__all__  # the whole closed error taxonomy
