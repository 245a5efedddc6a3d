"""SQL rendering of bound filters, one shared walk for every dialect (contract §3.4 "Rendering").

A :class:`Dialect` holds only what differs between engines: the placeholder style, the
identifier quotes, the ``ESCAPE`` clause as written in SQL text, the characters that must be
escaped inside a LIKE pattern, and two value rules (PostgreSQL ``money``; SQLite's text forms).
Values are **always** bound parameters (§3.4); nothing from a request is interpolated except
quoted identifiers, which come from the catalog.

Semantics (§3.4 "Operators and arity", "Nulls"):

* ``eq``: one value ``f = ?``, several ``f IN (?, …)``; ``null`` adds ``f IS NULL`` ORed
  (``eq [null]`` → ``f IS NULL``). ``in`` is always ``f IN (?, …)``, with the same null rule.
* ``ne``: ``f <> ?`` per value, ANDed; ``nin``: ``f NOT IN (?, …)``; a ``null`` in either adds
  ``f IS NOT NULL``, ANDed.
* ``gt``/``gte``/``lt``/``lte``: ``f > ?`` and so on; ``between``: ``f >= ? AND f <= ?``, or
  ``f < ?`` for an exclusive (end-of-day) upper bound.
* ``like``: ``f LIKE ? ESCAPE '\\'``; the pattern is re-escaped from its tokens
  (``parse.like_tokens``), so SQL Server also gets ``[`` as ``\\[``.

Only ORed groups are parenthesized; everything else is a flat ``AND`` chain.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from enum import StrEnum

from fetcher.engine.filters.ast import BoundCondition, BoundFieldFilter, Operator
from fetcher.engine.filters.parse import LikeTokenKind, like_tokens
from fetcher.engine.types import Column, EngineType

__all__ = [
    "Dialect",
    "MYSQL",
    "ORACLE",
    "POSTGRESQL",
    "Paramstyle",
    "SQLITE",
    "SQL_SERVER",
    "dialect_for",
    "like_pattern",
    "quote_identifier",
    "render_select",
    "render_where",
]


class Paramstyle(StrEnum):
    """DB-API placeholder styles in use (§3.4 rendering table, §11.1)."""

    FORMAT = "format"  # %s
    QMARK = "qmark"  # ?
    NUMERIC = "numeric"  # :1, :2, …


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between SQL engines when rendering a filtered ``SELECT``."""

    engine: EngineType
    paramstyle: Paramstyle
    quote_open: str
    quote_close: str
    #: The clause exactly as written in SQL text (MySQL string literals need ``'\\\\'``).
    escape_clause: str = " ESCAPE '\\'"
    #: Characters written as ``\\c`` inside a LIKE pattern.
    like_specials: str = "%_\\"
    #: PostgreSQL: ``money`` values are bound as text with ``::money``, selected as numeric.
    money_cast: bool = False
    #: SQLite: temporal, Decimal and UUID values are bound in their text forms.
    text_values: bool = False


POSTGRESQL = Dialect(EngineType.POSTGRESQL, Paramstyle.FORMAT, '"', '"', money_cast=True)
MYSQL = Dialect(EngineType.MYSQL, Paramstyle.FORMAT, "`", "`", escape_clause=" ESCAPE '\\\\'")
SQL_SERVER = Dialect(EngineType.SQL_SERVER, Paramstyle.QMARK, "[", "]", like_specials="%_\\[")
ORACLE = Dialect(EngineType.ORACLE, Paramstyle.NUMERIC, '"', '"')
SQLITE = Dialect(EngineType.SQLITE, Paramstyle.QMARK, '"', '"', text_values=True)

_DIALECTS = {d.engine: d for d in (POSTGRESQL, MYSQL, SQL_SERVER, ORACLE, SQLITE)}
_COMPARISONS = {Operator.GT: ">", Operator.GTE: ">=", Operator.LT: "<", Operator.LTE: "<="}


def dialect_for(engine: EngineType) -> Dialect:
    """The dialect of a SQL engine; ``ValueError`` for MongoDB (see ``filters.mongo``)."""
    try:
        return _DIALECTS[EngineType(engine)]
    except KeyError:
        raise ValueError(f"no SQL dialect for engine {engine}") from None


def quote_identifier(dialect: Dialect, name: str) -> str:
    """Quote a catalog name (§3.4): the closing quote doubled; ``%`` doubled for ``%s`` styles."""
    body = name.replace(dialect.quote_close, dialect.quote_close * 2)
    if dialect.paramstyle is Paramstyle.FORMAT:
        body = body.replace("%", "%%")
    return f"{dialect.quote_open}{body}{dialect.quote_close}"


def like_pattern(dialect: Dialect, pattern: str) -> str:
    """The bound LIKE parameter for ``pattern`` under ``ESCAPE '\\'`` (§3.4 "LIKE")."""
    out: list[str] = []
    for token in like_tokens(pattern):
        if token.kind is LikeTokenKind.LITERAL:
            escape = "\\" if token.char in dialect.like_specials else ""
            out.append(escape + token.char)
        else:
            out.append(token.kind.value)
    return "".join(out)


def _is_money(dialect: Dialect, column: Column) -> bool:
    return dialect.money_cast and column.native_type.lower() == "money"


def _text_form(value: object) -> object:
    """SQLite text forms: the ones Python's sqlite3 adapters and SQLite functions use."""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, Decimal | uuid.UUID):
        return str(value)
    return value


class _Binder:
    """Collects parameters and hands out placeholders in order."""

    def __init__(self, dialect: Dialect, start_index: int) -> None:
        self.dialect = dialect
        self.next_index = start_index
        self.params: list[object] = []

    def bind(self, column: Column, value: object) -> str:
        if _is_money(self.dialect, column):
            self.params.append(str(value))
            return self._placeholder() + "::money"
        self.params.append(_text_form(value) if self.dialect.text_values else value)
        return self._placeholder()

    def bind_raw(self, value: object) -> str:
        self.params.append(value)
        return self._placeholder()

    def _placeholder(self) -> str:
        style = self.dialect.paramstyle
        if style is Paramstyle.NUMERIC:
            self.next_index += 1
            return f":{self.next_index - 1}"
        return "%s" if style is Paramstyle.FORMAT else "?"


def _render_in(f: str, column: Column, cond: BoundCondition, binder: _Binder) -> str:
    values = [v for v in cond.values if v is not None]
    has_null = len(values) < len(cond.values)
    if not values:
        return f"{f} IS NULL"
    if cond.op is Operator.EQ and len(values) == 1:
        test = f"{f} = {binder.bind(column, values[0])}"
    else:
        test = f"{f} IN ({', '.join(binder.bind(column, v) for v in values)})"
    return f"({test} OR {f} IS NULL)" if has_null else test


def _render_not_in(f: str, column: Column, cond: BoundCondition, binder: _Binder) -> str:
    values = [v for v in cond.values if v is not None]
    parts: list[str] = []
    if cond.op is Operator.NE:
        parts.extend(f"{f} <> {binder.bind(column, v)}" for v in values)
    elif values:
        parts.append(f"{f} NOT IN ({', '.join(binder.bind(column, v) for v in values)})")
    if len(values) < len(cond.values):
        parts.append(f"{f} IS NOT NULL")
    return " AND ".join(parts)


def _render_condition(f: str, column: Column, cond: BoundCondition, binder: _Binder) -> str:
    op = cond.op
    if op in (Operator.EQ, Operator.IN):
        return _render_in(f, column, cond, binder)
    if op in (Operator.NE, Operator.NIN):
        return _render_not_in(f, column, cond, binder)
    if op in _COMPARISONS:
        return f"{f} {_COMPARISONS[op]} {binder.bind(column, cond.values[0])}"
    if op is Operator.BETWEEN:
        lower = binder.bind(column, cond.values[0])
        upper = binder.bind(column, cond.values[1])
        return f"{f} >= {lower} AND {f} {'<' if cond.upper_exclusive else '<='} {upper}"
    # Operator.LIKE: the pattern is a string (parse), escaped for this dialect.
    pattern = binder.bind_raw(like_pattern(binder.dialect, str(cond.values[0])))
    return f"{f} LIKE {pattern}{binder.dialect.escape_clause}"


def render_where(
    dialect: Dialect, filters: Sequence[BoundFieldFilter], *, start_index: int = 1
) -> tuple[str, list[object]]:
    """The condition text (no ``WHERE``; ``""`` when there is none) and its parameters.

    Every condition of every field is ANDed (§3.4 "Combination"). ``start_index`` numbers the
    first ``:n`` placeholder on Oracle and is ignored by the other styles.
    """
    binder = _Binder(dialect, start_index)
    parts = [
        _render_condition(quote_identifier(dialect, ff.column.name), ff.column, cond, binder)
        for ff in filters
        for cond in ff.conditions
    ]
    return " AND ".join(parts), binder.params


def _select_item(dialect: Dialect, column: Column) -> str:
    name = quote_identifier(dialect, column.name)
    return f"{name}::numeric AS {name}" if _is_money(dialect, column) else name


def render_select(
    dialect: Dialect,
    schema: str,
    table: str,
    columns: Sequence[Column],
    filters: Sequence[BoundFieldFilter],
) -> tuple[str, list[object]]:
    """``SELECT <cols> FROM [<schema>.]<table>[ WHERE …]`` and its parameters (§3.4, §5.3).

    The schema is omitted when ``""``. PostgreSQL ``money`` columns are selected as
    ``"x"::numeric AS "x"`` (§5.3), so they never arrive as locale strings.
    """
    if not columns:
        raise ValueError("render_select needs at least one column")
    items = ", ".join(_select_item(dialect, c) for c in columns)
    source = quote_identifier(dialect, table)
    if schema:
        source = f"{quote_identifier(dialect, schema)}.{source}"
    where, params = render_where(dialect, filters)
    sql = f"SELECT {items} FROM {source}"  # noqa: S608 - quoted identifiers, bound values
    return (f"{sql} WHERE {where}" if where else sql), params
