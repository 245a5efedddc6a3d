"""Deduplication on ``ce-id`` (CONTRACT §8.4, §8.6; the Job events page: "Treat a repeated
``ce-id`` as a duplicate and acknowledge it without reprocessing").

Delivery is at-least-once and the repairer may re-emit an event that already arrived, always
with the same ``ce-id``. A :class:`Deduplicator` records the ``ce-id`` of every event a consumer
*claimed*:

* ``await claim(ce_id)`` → ``True`` the first time (process the event), ``False`` for a
  duplicate (acknowledge it, do nothing else);
* ``await release(ce_id)`` forgets a claim whose processing failed, so a redelivery is
  processed again; :meth:`Deduplicator.guard` does both around a block.

Key on :attr:`JobCompleted.ce_id` of a *verified* event: :func:`verify_event` binds ``ce-id`` to
the signed body. Never key on the broker's message ID.

:class:`MemoryDeduplicator` is bounded (``max_entries``, oldest evicted first) with a TTL; it
protects one process. :class:`PostgresDeduplicator` is shared by every replica and survives
restarts: a primary key on ``ce_id`` and ``INSERT … ON CONFLICT DO NOTHING`` make the claim
atomic, so of N concurrent consumers exactly one wins.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, runtime_checkable

from fetcher.lifecycle import AsyncResource

__all__ = ["Deduplicator", "MemoryDeduplicator", "PostgresDeduplicator"]

DEFAULT_TTL_SECONDS = 7 * 24 * 3600
"""Longer than the outbox's 7-day feed retention and any sane freshness window."""
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


@runtime_checkable
class Deduplicator(Protocol):
    """Records claimed ``ce-id`` values. ``claim`` MUST be atomic: of concurrent claims of one
    ``ce-id``, exactly one returns ``True``."""

    async def claim(self, ce_id: str) -> bool: ...

    async def release(self, ce_id: str) -> None: ...


@asynccontextmanager
async def _guard(dedup: Deduplicator, ce_id: str) -> AsyncIterator[bool]:
    fresh = await dedup.claim(ce_id)
    try:
        yield fresh
    except BaseException:
        if fresh:
            await dedup.release(ce_id)
        raise


class MemoryDeduplicator:
    """In-process, bounded and expiring. ``clock`` (monotonic seconds) is for tests."""

    def __init__(
        self,
        *,
        max_entries: int = 100_000,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1 or ttl_seconds <= 0:
            raise ValueError("max_entries and ttl_seconds must be positive")
        self.max_entries = max_entries
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def _expire(self, now: float) -> None:
        while self._seen:
            oldest, stamp = next(iter(self._seen.items()))
            if now - stamp < self.ttl_seconds:
                return
            del self._seen[oldest]

    async def claim(self, ce_id: str) -> bool:
        now = self._clock()
        self._expire(now)
        if ce_id in self._seen:
            return False
        self._seen[ce_id] = now
        while len(self._seen) > self.max_entries:
            self._seen.popitem(last=False)
        return True

    async def release(self, ce_id: str) -> None:
        self._seen.pop(ce_id, None)

    def guard(self, ce_id: str) -> AbstractAsyncContextManager[bool]:
        """``async with dedup.guard(ce_id) as fresh:`` — released again if the block raises."""
        return _guard(self, ce_id)


class PostgresDeduplicator(AsyncResource):
    """Claims stored in a PostgreSQL table (``pip install 'fetcher[postgres]'``, psycopg 3).

    ``async with PostgresDeduplicator(conninfo) as dedup`` opens one connection (autocommit)
    and creates the table when missing: ``<table>(ce_id text PRIMARY KEY, claimed_at
    timestamptz NOT NULL DEFAULT now())``. :meth:`purge` deletes claims older than a TTL.
    """

    def __init__(self, conninfo: str, *, table: str = "fetcher_consumed_events") -> None:
        if _TABLE_NAME.fullmatch(table) is None:
            raise ValueError("table must be a plain SQL identifier")
        self._conninfo = conninfo
        self.table = table
        self._conn: Any = None

    def __repr__(self) -> str:
        return f"PostgresDeduplicator(table={self.table!r})"

    def _sql(self, template: str) -> Any:
        from psycopg import sql

        return sql.SQL(template).format(table=sql.Identifier(self.table))

    async def open(self) -> None:
        import psycopg

        if self._conn is not None:
            return
        self._conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        await self._conn.execute(
            self._sql(
                "CREATE TABLE IF NOT EXISTS {table} (ce_id text PRIMARY KEY,"
                " claimed_at timestamptz NOT NULL DEFAULT now())"
            )
        )

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def _require(self) -> Any:
        if self._conn is None:
            raise RuntimeError("PostgresDeduplicator is not open")
        return self._conn

    async def claim(self, ce_id: str) -> bool:
        cursor = await self._require().execute(
            self._sql("INSERT INTO {table} (ce_id) VALUES (%s) ON CONFLICT DO NOTHING"), (ce_id,)
        )
        return bool(cursor.rowcount == 1)

    async def release(self, ce_id: str) -> None:
        await self._require().execute(self._sql("DELETE FROM {table} WHERE ce_id = %s"), (ce_id,))

    async def purge(self, older_than_seconds: float = DEFAULT_TTL_SECONDS) -> int:
        """Delete claims older than ``older_than_seconds``; return how many were deleted."""
        cursor = await self._require().execute(
            self._sql("DELETE FROM {table} WHERE claimed_at < now() - make_interval(secs => %s)"),
            (older_than_seconds,),
        )
        return int(cursor.rowcount)

    def guard(self, ce_id: str) -> AbstractAsyncContextManager[bool]:
        """``async with dedup.guard(ce_id) as fresh:`` — released again if the block raises."""
        return _guard(self, ce_id)
