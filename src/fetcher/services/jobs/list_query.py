"""The query of ``GET /v1/fetcher`` (issue 21): its parameters, checked all at once.

Unlike the connection list (§2.6.2, which ignores unknown parameters), this route answers
``400`` for an unknown parameter too, and names **every** bad parameter: the error's ``code``,
``title`` and ``message`` are those of the first problem in the order below, and ``fields``
maps each bad parameter to its message. The codes are the connection list's: ``FET-0405``
(unknown, repeated or malformed parameter; ``limit`` not an integer), ``FET-0406`` (``limit``
over ``MAX_PAGINATION_LIMIT``), ``FET-0408`` (a date), ``FET-0409`` (``createdTo`` before
``createdFrom``). As there, an empty value is absent.

Order: unknown and repeated parameters (in request order), then ``status``, ``connectionId``,
``createdFrom``, ``createdTo``, the window, ``limit``, ``cursor`` (its form only; its signature
is checked against the tenant and filters by :mod:`fetcher.services.jobs.cursor`).

``status`` is one or more of the four states, lower-case, comma-separated (no spaces).
Dates follow the connection list's ``startDate``/``endDate`` (the same ``YYYY-MM-DD`` pattern,
UTC days, ``createdFrom`` inclusive from that day's start, ``createdTo`` through that day's
end) and also take an RFC 3339 date-time (an offset or ``Z`` required; ``createdTo`` then
includes that millisecond).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, NoReturn, cast, get_args

from fetcher.services.api import shapes
from fetcher.services.errors import ApiError
from fetcher.services.records import JobStatus
from fetcher.services.timeutil import truncate_ms

__all__ = [
    "CURSOR_PATTERN",
    "DATE",
    "DATE_TIME",
    "DEFAULT_JOB_PAGE",
    "JOB_LIST_PARAMETERS",
    "JOB_STATUSES",
    "MAX_CURSOR_LENGTH",
    "STATUS_MESSAGE",
    "STATUS_PATTERN",
    "JobListRequest",
    "job_list_limit",
    "parse_job_list",
]

JOB_STATUSES: tuple[JobStatus, ...] = get_args(JobStatus)
DEFAULT_JOB_PAGE = 20
MAX_CURSOR_LENGTH = 256
#: An unknown parameter's name is echoed in the error cut to this many characters, and at most
#: this many unknown names are echoed: a query of thousands of names gets a small answer.
MAX_ECHOED_NAME = 100
MAX_ECHOED_NAMES = 10
#: The parameters, in check order.
JOB_LIST_PARAMETERS = ("status", "connectionId", "createdFrom", "createdTo", "limit", "cursor")

#: The connection list's ``YYYY-MM-DD`` (year 0000 refused), alone or as a date-time's date.
_DATE = shapes.START_DATE.schema["anyOf"][1]["pattern"][1:-1]
#: RFC 3339 ``date-time`` (``T``/``Z`` in either case, any fraction digits, an offset required).
_HMS = "[0-9]{2}:[0-9]{2}:[0-9]{2}"
DATE_TIME = f"{_DATE}[Tt]{_HMS}(?:\\.[0-9]+)?(?:[Zz]|[+-][0-9]{{2}}:[0-9]{{2}})"
DATE = _DATE
#: ``status``: lower-case states, comma-separated, no spaces.
STATUS_PATTERN = "(?:{0})(?:,(?:{0}))*".format("|".join(JOB_STATUSES))
#: ``<position>.<tag>`` in base64url (:mod:`fetcher.services.jobs.cursor`).
CURSOR_PATTERN = f"[A-Za-z0-9_-]{{1,{MAX_CURSOR_LENGTH - 23}}}\\.[A-Za-z0-9_-]{{22}}"
_UUID = re.compile(shapes.UUID_PATTERN)
STATUS_MESSAGE = "status must be one or more of " + ", ".join(JOB_STATUSES) + " (comma-separated)"


@dataclass(frozen=True, slots=True)
class JobListRequest:
    """Validated parameters: ``created_before`` is an exclusive upper bound."""

    limit: int
    statuses: frozenset[JobStatus] = frozenset()
    connection_id: str | None = None
    created_from: datetime | None = None
    created_before: datetime | None = None
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class _Problem:
    name: str
    code: str
    message: str


class _Bad(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@functools.cache
def job_list_limit(max_limit: int) -> shapes.QueryParam[int]:
    """``limit``: the connection list's rule (FET-0405, FET-0406) with a default of 20."""
    return shapes._query_int(  # the connection list's own integer rule, with another default
        "limit",
        1,
        max_limit,
        DEFAULT_JOB_PAGE,
        f"Page size 1..{max_limit} (MAX_PAGINATION_LIMIT), default {DEFAULT_JOB_PAGE}.",
        page_size=True,
    )


def _statuses(raw: str) -> frozenset[JobStatus]:
    if re.fullmatch(STATUS_PATTERN, raw) is None:
        raise _Bad("FET-0405", STATUS_MESSAGE)
    return frozenset(cast(JobStatus, part) for part in raw.split(","))


def _connection_id(raw: str) -> str:
    if _UUID.fullmatch(raw) is None:
        raise _Bad("FET-0405", "connectionId must be a UUID")
    return raw.lower()


#: Every instant a window bound may be, in UTC: ``[0001-01-01, 9999-12-31)``. The last day is
#: left out so that ``createdTo``'s exclusive end (its next day or millisecond) exists too.
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
LATEST_DAY = shapes.LATEST_LISTED_DAY
_END = datetime.combine(LATEST_DAY + timedelta(days=1), time(0), tzinfo=UTC)


def _moment(name: str) -> Callable[[str], tuple[datetime, bool]]:
    """A date (→ its UTC midnight, ``True``) or an RFC 3339 date-time (→ UTC, ``False``).
    A well-formed value outside :data:`EARLIEST`..:data:`LATEST_DAY` in UTC (``9999-12-31``,
    ``0001-01-01T00:00:00+23:59``) is FET-0408 too, naming the parameter and the range."""

    def parse(raw: str) -> tuple[datetime, bool]:
        moment: datetime | None = None
        whole_day = False
        try:
            if re.fullmatch(_DATE, raw):
                moment, whole_day = datetime.combine(date.fromisoformat(raw), time(0), UTC), True
            elif re.fullmatch(DATE_TIME, raw):
                moment, whole_day = _instant(raw), False
            else:
                raise ValueError(raw)
        except ValueError:
            raise _Bad(
                "FET-0408", f"{name} must be a date (YYYY-MM-DD) or an RFC 3339 date-time"
            ) from None
        except OverflowError:  # before year 1 or after year 9999 once in UTC
            pass
        if moment is None or not EARLIEST <= moment < _END:
            raise _Bad(
                "FET-0408", f"{name} must lie between 0001-01-01 and {LATEST_DAY} (UTC)"
            ) from None
        return moment, whole_day

    return parse


#: A :data:`DATE_TIME` text after ``Z`` became ``+00:00``: its parts, to pad the fraction.
_INSTANT_PARTS = "(?P<head>[^.]+?)(?:[.](?P<fraction>[0-9]+))?(?P<zone>[+-][0-9]{2}:[0-9]{2})"


def _instant(raw: str) -> datetime:
    """An RFC 3339 date-time in UTC; more than 6 fraction digits are cut (stored times have
    milliseconds), and a leap second ``:60`` is the next second's start."""
    text = raw.upper().replace("Z", "+00:00")
    leap = text[17:19] == "60"
    text = f"{text[:17]}59{text[19:]}" if leap else text
    parts = re.fullmatch(_INSTANT_PARTS, text)
    if parts is None:
        raise ValueError(raw)
    fraction = (parts["fraction"] or "")[:6].ljust(6, "0")
    moment = datetime.fromisoformat(f"{parts['head']}.{fraction}{parts['zone']}").astimezone(UTC)
    return moment.replace(microsecond=0) + timedelta(seconds=1) if leap else moment


def _cursor(raw: str) -> str:
    if re.fullmatch(CURSOR_PATTERN, raw) is None:
        raise _Bad("FET-0405", "cursor is not a cursor this list returned")
    return raw


def _unknown(items: Iterable[tuple[str, str]]) -> list[_Problem]:
    """Unknown names (the first :data:`MAX_ECHOED_NAMES`, each cut to :data:`MAX_ECHOED_NAME`
    characters) and repeated ones."""
    seen: dict[str, int] = {}
    for name, _ in items:
        seen[name] = seen.get(name, 0) + 1
    problems: list[_Problem] = []
    echoed = 0
    for name, count in seen.items():
        if name not in JOB_LIST_PARAMETERS:
            echoed += 1
            if echoed > MAX_ECHOED_NAMES:
                continue
            shown = name if len(name) <= MAX_ECHOED_NAME else name[: MAX_ECHOED_NAME - 1] + "…"
            problems.append(_Problem(shown, "FET-0405", f"{shown} is not a parameter of this list"))
        elif count > 1:
            problems.append(_Problem(name, "FET-0405", f"{name} must be given once"))
    return problems


def parse_job_list(items: Iterable[tuple[str, str]], *, max_limit: int) -> JobListRequest:
    """The validated request, or ``ApiError`` naming every bad parameter (module docstring)."""
    pairs = list(items)
    problems = _unknown(pairs)
    values = {name: value for name, value in pairs if value != ""}
    bad = {p.name for p in problems}
    parsed: dict[str, Any] = {}
    checks: dict[str, Callable[[str], Any]] = {
        "status": _statuses,
        "connectionId": _connection_id,
        "createdFrom": _moment("createdFrom"),
        "createdTo": _moment("createdTo"),
        "cursor": _cursor,
    }
    for name in JOB_LIST_PARAMETERS:
        if name in bad:
            continue
        try:
            if name == "limit":
                parsed[name] = job_list_limit(max_limit).read(values)
            elif name in values:
                parsed[name] = checks[name](values[name])
        except (_Bad, ApiError) as exc:
            problems.append(_Problem(name, exc.code, exc.message))
    window = _window(parsed.get("createdFrom"), parsed.get("createdTo"))
    if isinstance(window, _Problem):
        _raise([*problems, window])
    if problems:
        _raise(problems)
    return JobListRequest(
        limit=parsed.get("limit", DEFAULT_JOB_PAGE),
        statuses=parsed.get("status", frozenset()),
        connection_id=parsed.get("connectionId"),
        created_from=window[0],
        created_before=window[1],
        cursor=parsed.get("cursor"),
    )


def _window(
    start: tuple[datetime, bool] | None, end: tuple[datetime, bool] | None
) -> tuple[datetime | None, datetime | None] | _Problem:
    """``[from, before)``: a ``createdTo`` date runs to the next midnight, an instant to the
    next millisecond (stored times have millisecond precision). An empty window is
    ``FET-0409``, as ``endDate`` < ``startDate`` is on the connection list."""
    before = None
    if end is not None:
        moment, whole_day = end
        step = timedelta(days=1) if whole_day else timedelta(milliseconds=1)
        before = (moment if whole_day else truncate_ms(moment)) + step
    if start is not None and before is not None and before <= start[0]:
        return _Problem("createdTo", "FET-0409", "createdTo must not be before createdFrom")
    return (start[0] if start else None, before)


def _raise(problems: list[_Problem]) -> NoReturn:
    first = problems[0]
    raise ApiError(first.code, first.message, fields={p.name: p.message for p in problems})
