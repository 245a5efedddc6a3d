"""The canonical contract dataset, defined once, and the Python reference over it.

Every engine plugin (``tests/contract/engines``) creates these tables natively; the tests then
compare what the connector returns with what this module says it must return:

* ``contract_items``: one column per §11.4 family (an engine keeps the families it supports),
  nulls in every nullable column, tricky strings (``%``, ``_``, ``\\``, quotes, an
  injection-shaped value, non-ASCII, an emoji, an empty string, two spellings differing only in
  case) and ``ITEM_ROWS`` rows, enough to need several batches at ``SMALL_BATCH``;
* ``INJECTION_TABLE`` with ``INJECTION_COLUMN``: names made of every quote character of every
  dialect, ``;``, ``--`` and ``%s``;
* ``contract_empty``: no rows;
* ``contract_view``: a view over ``contract_items`` (``id``, ``txt``), where the engine has views;
* ``contract_bulk``: ``BULK_ROWS`` wide rows (20 MB), more than socket buffers hold, so that a
  server-side cursor is observable from another session while the stream is paused.

Values are canonical Python values (``int``, ``Decimal``, ``float``, ``bool``, ``str``,
``date``, naive ``datetime`` for timestamp, aware UTC ``datetime`` for timestamptz, ``time``,
``UUID``, a JSON-ready ``dict`` for json, ``bytes``); ``None`` is SQL NULL.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from fetcher.engine.types import TypeFamily

ITEMS = "contract_items"
EMPTY = "contract_empty"
VIEW = "contract_view"
BULK = "contract_bulk"
#: Every identifier quote of every dialect (``"``, `````, ``]``), a string quote, ``;``, ``--``
#: and a ``%s`` placeholder; no ``.`` (a dot splits a table key, §3.3) and no ``$`` (MongoDB).
INJECTION_TABLE = "q\"t'b;--`]%s"
INJECTION_COLUMN = "c\"o'l; DROP--`]%s"

ITEM_ROWS = 45
SMALL_BATCH = 7
BULK_ROWS = 20_000
BULK_PAD = 1000

HOSTILE = "'; DROP TABLE contract_items; --"
TRICKY_TEXT: tuple[str | None, ...] = (
    "100%",
    "100 percent",
    "a_b",
    "axb",
    "back\\slash",
    "backslash",
    "O'Brien",
    HOSTILE,
    'Robert"); DROP TABLE x;--',
    "ünïcødé ✓",
    "emoji 😀",
    "Item 1",
    "",
    None,
    "%s %(x)s",
)


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One dataset column: its canonical name and family, and how row ``i`` gets its value."""

    name: str
    family: TypeFamily
    value: Callable[[int], object]
    nullable: bool = True


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    columns: tuple[ColumnSpec, ...]
    rows: tuple[Mapping[str, object], ...] = ()
    is_view: bool = False

    def column(self, name: str) -> ColumnSpec:
        return next(c for c in self.columns if c.name == name)


def _every(n: int, fn: Callable[[int], object]) -> Callable[[int], object]:
    """``fn(i)``, but NULL on every ``n``-th row."""
    return lambda i: None if i % n == 0 else fn(i)


def _decimal(i: int) -> Decimal:
    # Two decimal places whose last digit is never 0, so engines that store NUMERIC as a double
    # (SQLite) still print the column scale; negatives included.
    cents = i * 1311 - 20_000
    if cents % 10 == 0:
        cents += 3
    return Decimal(cents).scaleb(-2)


def _text(i: int) -> str | None:
    if i <= len(TRICKY_TEXT):
        return TRICKY_TEXT[i - 1]
    return f"item {i}"


def _bigint(i: int) -> int:
    return 9_007_199_254_740_993 if i == 2 else i * 7 - 100


ITEM_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("id", TypeFamily.INTEGER, lambda i: i, nullable=False),
    ColumnSpec("MixedCol", TypeFamily.INTEGER, lambda i: i * 2, nullable=False),
    ColumnSpec("num_i", TypeFamily.INTEGER, _every(9, _bigint)),
    ColumnSpec("num_d", TypeFamily.DECIMAL, _every(11, _decimal)),
    ColumnSpec("num_f", TypeFamily.FLOAT, _every(10, lambda i: 0.1 if i == 1 else i * 0.25 - 3)),
    ColumnSpec("flag", TypeFamily.BOOLEAN, _every(8, lambda i: i % 3 == 0)),
    ColumnSpec("txt", TypeFamily.TEXT, _text),
    ColumnSpec("day", TypeFamily.DATE, _every(12, lambda i: date(2024, 1, 1) + timedelta(i))),
    ColumnSpec(
        "ts",
        TypeFamily.TIMESTAMP,
        _every(13, lambda i: datetime(2024, 1, 1) + i * timedelta(hours=7, seconds=5.25)),
    ),
    ColumnSpec(
        "tstz",
        TypeFamily.TIMESTAMPTZ,
        _every(
            14,
            lambda i: datetime(2023, 6, 1, tzinfo=UTC) + i * timedelta(hours=11, seconds=3.5),
        ),
    ),
    ColumnSpec(
        "tm",
        TypeFamily.TIME,
        _every(15, lambda i: time(i * 5 % 24, i * 7 % 60, i * 11 % 60, 500_000 * (i % 2))),
    ),
    ColumnSpec("uid", TypeFamily.UUID, _every(16, lambda i: UUID(int=i * 0x1_0000_0000_0001))),
    ColumnSpec(
        "doc",
        TypeFamily.JSON,
        _every(7, lambda i: {"i": i, "tags": ["a", i % 3 == 0], "nested": {"k": None}}),
    ),
    ColumnSpec("raw", TypeFamily.BYTES, _every(6, lambda i: bytes([i % 256, 0, 255, i * 3 % 256]))),
)


@dataclass(frozen=True, slots=True)
class Dataset:
    """The tables one engine creates: the canonical dataset narrowed to its families."""

    items: TableSpec
    injection: TableSpec
    empty: TableSpec
    view: TableSpec | None
    bulk: TableSpec
    families: frozenset[TypeFamily] = field(default_factory=frozenset)

    @property
    def tables(self) -> tuple[TableSpec, ...]:
        listed = (self.items, self.injection, self.empty, self.view, self.bulk)
        return tuple(t for t in listed if t is not None)


def _rows(columns: Sequence[ColumnSpec], count: int) -> tuple[dict[str, object], ...]:
    return tuple({c.name: c.value(i) for c in columns} for i in range(1, count + 1))


def build_dataset(
    families: frozenset[TypeFamily],
    *,
    has_views: bool = True,
    adjust: Callable[[ColumnSpec, object], object] | None = None,
) -> Dataset:
    """The dataset for an engine supporting ``families``; ``adjust`` maps a canonical value to
    the value the engine really stores (e.g. Oracle's ``''`` is NULL), before the reference
    sees it."""
    columns = tuple(c for c in ITEM_COLUMNS if c.family in families)
    rows = _rows(columns, ITEM_ROWS)
    if adjust is not None:
        rows = tuple({c.name: adjust(c, row[c.name]) for c in columns} for row in rows)
    items = TableSpec(ITEMS, columns, rows)
    id_col = ITEM_COLUMNS[0]
    txt_col = next(c for c in ITEM_COLUMNS if c.name == "txt")
    hostile = ("x' OR '1'='1", "%s", "ok")
    injection = TableSpec(
        INJECTION_TABLE,
        (id_col, replace(txt_col, name=INJECTION_COLUMN)),
        tuple({"id": i + 1, INJECTION_COLUMN: v} for i, v in enumerate(hostile)),
    )
    empty = TableSpec(EMPTY, (id_col, replace(txt_col, name="label")))
    view = TableSpec(VIEW, (id_col, txt_col), is_view=True) if has_views else None
    bulk = TableSpec(
        BULK,
        (replace(id_col, name="n"), replace(txt_col, name="pad")),
        (),  # generated natively by the plugin: n = 1..BULK_ROWS, pad = BULK_PAD × 'x'
    )
    return Dataset(items, injection, empty, view, bulk, families)


# --------------------------------------------------------------------------------------------
# Expected JSON (§5.3) of a canonical value
# --------------------------------------------------------------------------------------------


def _fraction(micros: int) -> str:
    return "" if not micros else "." + f"{micros:06d}".rstrip("0")


def _expected_datetime(value: datetime) -> str:
    utc = value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(utc.microsecond) + "Z"


#: Checked in order: ``datetime`` before its base class ``date``.
_EXPECTED: tuple[tuple[type, Callable[[Any], object]], ...] = (
    (Decimal, str),
    (datetime, _expected_datetime),
    (date, date.isoformat),
    (time, lambda t: t.strftime("%H:%M:%S") + _fraction(t.microsecond)),
    (UUID, str),
    (bytes, lambda b: base64.b64encode(b).decode("ascii")),
)


def expected_json(family: TypeFamily, value: object) -> object:
    """The §5.3 encoding of a canonical value, as ``json.loads`` returns it."""
    for kind, encode in _EXPECTED:
        if isinstance(value, kind):
            return encode(value)
    return value


# --------------------------------------------------------------------------------------------
# The filter reference: SQL three-valued semantics over canonical values (§3.4)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Collation:
    """How an engine compares text: ``=``/``IN`` and ``LIKE`` case sensitivity (§3.4)."""

    eq_case_insensitive: bool = False
    like_case_insensitive: bool = False


def _ref_timestamp(raw: object) -> datetime:
    parsed = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


_NUMERIC = (TypeFamily.INTEGER, TypeFamily.DECIMAL, TypeFamily.FLOAT)
_REF_BINDERS: dict[TypeFamily, Callable[[object], object]] = {
    **dict.fromkeys(_NUMERIC, lambda raw: Decimal(str(raw))),
    TypeFamily.DATE: lambda raw: date.fromisoformat(str(raw)),
    TypeFamily.TIMESTAMP: _ref_timestamp,
    TypeFamily.TIMESTAMPTZ: _ref_timestamp,
    TypeFamily.TIME: lambda raw: time.fromisoformat(str(raw)),
    TypeFamily.UUID: lambda raw: UUID(str(raw)),
    TypeFamily.BOOLEAN: lambda raw: raw if isinstance(raw, bool) else raw == "true",
}


def _ref_value(family: TypeFamily, raw: object) -> object:
    """A raw JSON filter value in the canonical type of ``family`` (an independent binder);
    text takes numbers and booleans as their JSON text."""
    binder = _REF_BINDERS.get(family)
    if binder is not None:
        return binder(raw)
    return raw if isinstance(raw, str) else str(raw).lower()


def _ref_stored(family: TypeFamily, value: object) -> object:
    if family in (TypeFamily.INTEGER, TypeFamily.DECIMAL, TypeFamily.FLOAT):
        return Decimal(str(value))
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value


def _like_regex(pattern: str, case_insensitive: bool) -> re.Pattern[str]:
    out: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if ch == "\\":
            out.append(re.escape(next(chars, "\\")))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.DOTALL | (re.IGNORECASE if case_insensitive else 0))


def _fold(value: object, fold: bool) -> object:
    return value.casefold() if fold and isinstance(value, str) else value


def _holds(
    family: TypeFamily, stored: object, op: str, raw: Sequence[object], collation: Collation
) -> bool:
    """One condition on one value, three-valued logic collapsed to "matches"."""
    nulls = any(v is None for v in raw)
    fold = collation.eq_case_insensitive and family is TypeFamily.TEXT
    values = [_fold(_ref_value(family, v), fold) for v in raw if v is not None]
    value = None if stored is None else _fold(_ref_stored(family, stored), fold)
    if op in ("eq", "in"):
        return (value is None and nulls) or (value is not None and value in values)
    if value is None:
        return False
    if op in ("ne", "nin"):
        return value not in values
    if op == "like":
        return bool(_like_regex(str(raw[0]), collation.like_case_insensitive).fullmatch(str(value)))
    compare: dict[str, Callable[[object], bool]] = {
        "gt": lambda v: value > v,  # type: ignore[operator]
        "gte": lambda v: value >= v,  # type: ignore[operator]
        "lt": lambda v: value < v,  # type: ignore[operator]
        "lte": lambda v: value <= v,  # type: ignore[operator]
    }
    if op == "between":
        return compare["gte"](values[0]) and compare["lte"](_between_upper(family, raw[1]))
    return compare[op](values[0])


def _between_upper(family: TypeFamily, raw: object) -> object:
    """§3.4 end-of-day rule: a date-only upper bound on a timestamp column covers that day."""
    bound = _ref_value(family, raw)
    is_date = isinstance(raw, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw) is not None
    if family in (TypeFamily.TIMESTAMP, TypeFamily.TIMESTAMPTZ) and is_date:
        assert isinstance(bound, datetime)
        return bound + timedelta(days=1) - timedelta(microseconds=1)
    return bound


def reference_ids(
    table: TableSpec, conditions: Mapping[str, Mapping[str, Sequence[object]]], collation: Collation
) -> set[int]:
    """The ids of ``table`` rows that ``{field: {op: [values]}}`` keeps, per §3.4."""
    kept: set[int] = set()
    for row in table.rows:
        if all(
            _holds(table.column(name).family, row[name], op, values, collation)
            for name, ops in conditions.items()
            for op, values in ops.items()
        ):
            kept.add(int(str(row["id"])))
    return kept
