"""The filter AST (contract §3.4).

A request's ``dataRequest.filters`` is parsed once (``filters.parse``) into these values. The
structure mirrors the JSON: datasource → table key (as requested) → field → conditions. Values
are the JSON scalars as received; binding to a column type happens later (``filters.bind``),
once discovery has told the column's family.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from fetcher.engine.types import Column

__all__ = [
    "BoundCondition",
    "BoundFieldFilter",
    "Condition",
    "FieldFilter",
    "FilterSpec",
    "Operator",
    "Scalar",
    "TableFilters",
]

#: A JSON scalar as received in a filter value list.
Scalar = str | int | float | bool | None


class Operator(StrEnum):
    EQ = "eq"
    NE = "ne"
    GT = "gt"
    GTE = "gte"
    LT = "lt"
    LTE = "lte"
    BETWEEN = "between"
    IN = "in"
    NIN = "nin"
    LIKE = "like"


@dataclass(frozen=True, slots=True)
class Condition:
    """One ``{operator: [values…]}`` entry. Arity has been checked by the parser."""

    op: Operator
    values: tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class FieldFilter:
    """All conditions on one field of one table; they are ANDed."""

    field: str
    conditions: tuple[Condition, ...]


#: table key (as requested) → field filters, in request order.
TableFilters = Mapping[str, tuple[FieldFilter, ...]]
#: datasource configName → its table filters.
FilterSpec = Mapping[str, TableFilters]


@dataclass(frozen=True, slots=True)
class BoundCondition:
    """A condition whose values are bound to the column's family (§3.4 "Values bound").

    ``values`` hold typed Python values (``int``, ``Decimal``, ``float``, ``bool``, ``str``,
    ``datetime.date``, ``datetime.datetime``, ``datetime.time``, ``uuid.UUID``) or ``None``
    for a JSON null. For ``between`` on a timestamp family with a date-only second value,
    ``upper_exclusive`` is true and ``values[1]`` is already the next day's midnight
    (the end-of-day rule): renderers then emit ``f >= ? AND f < ?``.
    """

    op: Operator
    values: tuple[object, ...]
    upper_exclusive: bool = False


@dataclass(frozen=True, slots=True)
class BoundFieldFilter:
    """The bound conditions on one discovered column; they are ANDed."""

    column: Column
    conditions: tuple[BoundCondition, ...]
