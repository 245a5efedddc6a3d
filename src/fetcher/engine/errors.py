"""The engine's closed error taxonomy (contract §1.4, §4.5).

Every failure that crosses a port is an :class:`EngineError` with one :class:`ErrorCategory`.
Adapters translate driver exceptions into it at their edge; hosts map categories to HTTP codes
or job failure texts. ``message`` holds the fixed part of a failure text (names from the request
only); ``detail`` holds driver or library text, which hosts MUST redact before it leaves the
process (§8.7).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Final

__all__ = [
    "EngineError",
    "ErrorCategory",
    "JsonDepthError",
    "MAX_ERROR_TEXT",
    "MAX_JSON_DEPTH",
    "naming_column",
    "query_error",
]

#: §4.5: the whole failure text is at most 2,000 code points.
MAX_ERROR_TEXT = 2000
#: The deepest nesting of one value (a parsed JSON column, a MongoDB embedded document or
#: array: §5.3) that Fetcher extracts: ``1`` and ``"x"`` nest 0 levels, ``[]`` and ``{"a": 1}``
#: 1, ``[[1]]`` and ``{"a": []}`` 2. A deeper value fails its job with the §4.5 query text
#: (:class:`JsonDepthError`), never ``internal error``.
#:
#: Why 250: orjson, which writes the rows of most batches
#: (``fetcher.adapters.jsonlayout.fastjson``), writes at most 254 nested containers, and a value in
#: a row sits inside 4 of them, as in the document (its object, the datasource's object, the
#: table's array, the row), so 250 is exactly the deepest value it writes, and the engine's own
#: encoder refuses deeper ones the same way. Every parser and encoder on the way needs at most
#: about three Python frames a level, which leaves room for its caller's stack under the recursion
#: limit (1,000); one called from a stack too deep even for that runs again on a fresh one. Sources
#: cap lower (MongoDB and MySQL 100, MariaDB's ``json_valid`` 31); PostgreSQL ``json``/``jsonb``
#: has no fixed bound. A document of such values nests at most 254 levels, which ``json.loads``
#: (§5.4) and other JSON readers of the result read.
MAX_JSON_DEPTH: Final = 250


class ErrorCategory(StrEnum):
    VALIDATION = "validation"
    NOT_FOUND = "not_found"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    LIMIT_EXCEEDED = "limit_exceeded"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    CONNECT = "connect"
    TIMEOUT = "timeout"
    CANCELED = "canceled"
    INTERNAL = "internal"


class EngineError(Exception):
    """An engine failure: ``str()`` is ``engine: [<category>] <message>``."""

    def __init__(self, category: ErrorCategory, message: str, *, detail: str | None = None) -> None:
        self.category = ErrorCategory(category)
        self.message = message
        self.detail = detail
        super().__init__(self.message)

    def text(self, redact: object = None) -> str:
        """The §4.5 failure text ``<fixed part>[: <detail>]``, cut to 2,000 code points.

        ``redact`` is an optional ``Callable[[str], str]`` applied to the detail only.
        """
        detail = self.detail
        if detail is not None and callable(redact):
            detail = str(redact(detail))
        text = self.message if not detail else f"{self.message}: {detail}"
        return truncate_error_text(text)

    def __str__(self) -> str:
        return f"engine: [{self.category.value}] {self.message}"

    def __repr__(self) -> str:
        return f"EngineError({self.category.value!r}, {self.message!r})"


def truncate_error_text(text: str) -> str:
    """§4.5: longer text is cut to its first 1,997 code points followed by ``...``."""
    if len(text) <= MAX_ERROR_TEXT:
        return text
    return text[: MAX_ERROR_TEXT - 3] + "..."


def query_error(datasource: str, detail: str | None = None) -> EngineError:
    """§4.5 Query row: ``failed to query datasource '<ds>'[: <detail>]`` (``unavailable``)."""
    return EngineError(
        ErrorCategory.UNAVAILABLE, f"failed to query datasource '{datasource}'", detail=detail
    )


class JsonDepthError(Exception):
    """A value nested deeper than :data:`MAX_JSON_DEPTH` levels: raised by the JSON column
    parsers and the value encoders of the engine and the adapters, wherever they meet one,
    before any recursion can exhaust the stack.

    It knows the ``column`` and ``table`` once whoever catches it on the way has named them
    (:meth:`located`); connectors (and, for a value the document writer refuses, the runner)
    turn it into the §4.5 query failure of their datasource (:meth:`query_error`). It is not a
    ``ValueError``: no "text that is not JSON stays text" fallback may swallow it.
    """

    def __init__(self, *, column: str | None = None, table: str | None = None) -> None:
        self.column = column
        self.table = table
        super().__init__(self.detail)

    def located(self, *, column: str | None = None, table: str | None = None) -> JsonDepthError:
        """This error with ``column`` and ``table`` filled in where still unknown."""
        self.column = self.column if self.column is not None else column
        self.table = self.table if self.table is not None else table
        self.args = (self.detail,)
        return self

    @property
    def detail(self) -> str:
        """``column 'c' of table 't' holds a JSON value nested deeper than 250 levels``
        (without the parts not known yet)."""
        where = " of ".join(
            f"{kind} '{name}'"
            for kind, name in (("column", self.column), ("table", self.table))
            if name is not None
        )
        subject = f"{where} holds a JSON value" if where else "a JSON value"
        return f"{subject} nested deeper than {MAX_JSON_DEPTH} levels"

    def query_error(self, datasource: str) -> EngineError:
        """The §4.5 failure of ``datasource``: ``failed to query datasource '<ds>': <detail>``."""
        return query_error(datasource, self.detail)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_depth_error, (self.column, self.table))


@contextmanager
def naming_column(name: str | None) -> Iterator[None]:
    """Converting one column: a :class:`JsonDepthError` raised inside names ``name`` as its
    column (where it does not know one yet)."""
    try:
        yield
    except JsonDepthError as exc:
        raise exc.located(column=name) from None


def _rebuild_depth_error(column: str | None, table: str | None) -> JsonDepthError:
    """Unpickling (an error crossing a process boundary keeps what it knew)."""
    return JsonDepthError(column=column, table=table)
