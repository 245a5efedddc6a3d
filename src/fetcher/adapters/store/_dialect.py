"""What the two metadata-store backends spell differently, and nothing else.

Every statement of the store is written once (:mod:`._statements`) in one spelling: named
``:name`` parameters, which sqlite3 reads as they are and :func:`pyformat` turns into
psycopg's ``%(name)s``. The rest of what differs between PostgreSQL and SQLite is a field of
:class:`Dialect`: how a timestamp is bound and read back, the boolean literals, the
current-time function, how a connection's metadata is matched, which outbox column numbers
the feed and how, claim locking, and whether an ``INSERT … RETURNING`` can feed a second
insert in one statement. No driver is imported here: the SQLite store must load without
psycopg (embedded mode runs without the PostgreSQL driver).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

__all__ = ["Dialect", "pyformat"]

# A quoted literal (kept as it is) or a ``:name`` parameter not part of a ``::`` cast.
_LITERAL_OR_PARAM = re.compile(r"'(?:[^']|'')*'|(?<![:\w]):([A-Za-z_]\w*)")


@lru_cache(maxsize=512)
def pyformat(sql: str) -> str:
    """``sql`` with every ``:name`` parameter as ``%(name)s`` and every ``%`` doubled, the
    form psycopg reads when parameters are passed. Quoted literals are not searched for
    parameters. Statement texts repeat (only IN lists vary in length), hence the cache."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        return match.group(0) if name is None else f"%({name})s"

    return _LITERAL_OR_PARAM.sub(replace, sql.replace("%", "%%"))


@dataclass(frozen=True, slots=True)
class Dialect:
    """One backend's spelling of what the shared statements leave open."""

    #: The folder of its migration scripts (``migrations/<name>``).
    name: str
    #: The statement text its driver runs, from the shared ``:name`` spelling.
    render: Callable[[str], str]
    #: A timestamp parameter (millisecond UTC; a naive value is refused) and its reading back.
    ts: Callable[[datetime], Any]
    read_ts: Callable[[Any], datetime]
    #: Boolean literals (``jobs.dedup_active`` is BOOLEAN on PostgreSQL, 0/1 on SQLite).
    true: str
    false: str
    #: The current time as SQL, in the column type of its timestamps (the migration ledger).
    now: str
    #: The type and default of ``schema_migrations.applied_at``, as the ledger was created.
    ledger_applied_at: str
    #: Taken first in the migration transaction; ``None`` where beginning it serializes.
    migration_lock: str | None
    #: One row when the migration ledger (``schema_migrations``) exists, none before the
    #: first migration: a read-only look at the ledger (``fetcher migrate --check``).
    ledger_exists: str
    #: §2.6.2: the predicate "metadata[key] has the JSON text value", from two placeholders.
    metadata_match: Callable[[str, str], str]
    #: The outbox column that holds the feed sequence (§2.12).
    feed_seq: str
    #: Statements, run in one transaction, that number committed outbox rows (the rowcount of
    #: the last is the count); empty where the column is numbered as rows are written.
    number_feed: tuple[str, ...]
    #: Appended to the claim of unsent outbox rows: rows another claimer holds are skipped.
    #: Empty where one embedded repairer claims alone.
    claim_lock: str
    #: ``WITH x AS (INSERT … RETURNING …) INSERT …`` is one statement (PostgreSQL); else the
    #: two inserts run in one transaction.
    chained_insert: bool
