"""Generated timestamps and identifiers (contract Conventions).

Every generated timestamp is UTC, truncated (not rounded) to milliseconds before it is stored
and written as ``YYYY-MM-DDTHH:MM:SS.mmmZ``. Connection and job IDs are UUIDv7.
"""

from __future__ import annotations

from datetime import UTC, datetime

import uuid6

__all__ = ["SystemClock", "format_ms", "new_id", "truncate_ms"]


def truncate_ms(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def format_ms(moment: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` in UTC, exactly three fraction digits."""
    utc = moment.astimezone(UTC)
    # The year by hand: strftime's %Y writes year 1 as "1" on glibc, which breaks both the
    # format and the lexical order the SQLite store relies on.
    return f"{utc.year:04d}-" + utc.strftime("%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def new_id() -> str:
    """A lower-case UUIDv7 (RFC 9562 §5.7), monotonic within the process."""
    return str(uuid6.uuid7())


class SystemClock:
    """The engine's Clock port over the system clock; ``now`` is already ms-truncated."""

    def now(self) -> datetime:
        return truncate_ms(datetime.now(UTC))

    def monotonic(self) -> float:
        import time

        return time.monotonic()
