"""The moments the client commands take (``jobs list --since/--until``, ``events tail
--since``): a duration back from now (``30s``, ``15m``, ``1h``, ``2d``, ``1w``), a date
(``YYYY-MM-DD``, UTC) or an RFC 3339 date-time with ``Z`` or an offset.

:func:`moment_text` is the argparse type, so a value that is none of these is a usage error
naming the user's own option (``argument --since: 'yesterday' is not …``), never an API
parameter the user did not type.
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, date, datetime, timedelta

from fetcher.cli.terminal import printable

__all__ = ["MOMENT_HELP", "RFC3339", "moment_instant", "moment_text", "parse_moment"]

MOMENT_HELP = (
    "a duration back from now (30m, 1h, 2d, 1w), a date (YYYY-MM-DD) or an RFC 3339 date-time"
)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"([0-9]{1,9})([smhdw])")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def moment_text(text: str) -> str:
    """An argparse type: ``text`` (stripped) when it is a duration, a date or an RFC 3339
    date-time (its range is the Manager's to check)."""
    stripped = text.strip()
    if _DURATION.fullmatch(stripped) or RFC3339.fullmatch(stripped):
        return stripped
    if _DAY.fullmatch(stripped):
        try:
            date.fromisoformat(stripped)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{stripped}' is not a calendar date") from None
        return stripped
    raise argparse.ArgumentTypeError(f"'{printable(text, max_chars=80)}' is not {MOMENT_HELP}")


def parse_moment(text: str, now: datetime) -> str:
    """A duration (``1h``) → the RFC 3339 instant that long before ``now``; a date or
    date-time is sent as is (the Manager checks its range)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        return text
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    moment = now.astimezone(UTC) - timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def moment_instant(text: str, now: datetime) -> datetime:
    """The aware instant a :func:`moment_text` value names (a date: its UTC midnight); a
    ValueError for one Python cannot represent."""
    sent = parse_moment(text, now)
    if _DAY.fullmatch(sent):
        return datetime.combine(date.fromisoformat(sent), datetime.min.time(), UTC)
    return datetime.fromisoformat(sent.replace("z", "Z").replace("t", "T"))
