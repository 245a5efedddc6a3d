"""Engines, column type families and discovered schemas (contract §3.3, §11.1, §11.4).

These are plain values that connectors return from discovery and that the planner, the filter
binder and the renderers consume.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "Column",
    "DiscoveredSchema",
    "EngineType",
    "TableSchema",
    "TypeFamily",
]


class EngineType(StrEnum):
    """A connection ``type`` (§2.5)."""

    POSTGRESQL = "POSTGRESQL"
    MYSQL = "MYSQL"
    SQL_SERVER = "SQL_SERVER"
    ORACLE = "ORACLE"
    MONGODB = "MONGODB"
    SQLITE = "SQLITE"


class TypeFamily(StrEnum):
    """§11.4: the family of a column type; it drives filter coercion and value encoding."""

    INTEGER = "integer"
    DECIMAL = "decimal"
    FLOAT = "float"
    BOOLEAN = "boolean"
    TEXT = "text"
    DATE = "date"
    TIMESTAMP = "timestamp"
    TIMESTAMPTZ = "timestamptz"
    TIME = "time"
    UUID = "uuid"
    JSON = "json"
    BYTES = "bytes"
    ARRAY = "array"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Column:
    """A discovered column: its catalog spelling, its family and the engine's type name.

    ``native_type`` is informative (e.g. ``money``, ``real``, ``objectId``); renderers use it
    where one engine type needs special handling inside a family (PostgreSQL ``money``).
    """

    name: str
    family: TypeFamily
    native_type: str = ""


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A discovered table or view. ``schema`` is ``""`` for engines without namespaces."""

    schema: str
    name: str
    columns: tuple[Column, ...]

    @property
    def label(self) -> str:
        """How failure texts name the table: ``schema.name``, or ``name`` without a schema."""
        return f"{self.schema}.{self.name}" if self.schema else self.name

    def column_named(self, name: str, *, case_insensitive: bool = False) -> Column | None:
        """The column matching ``name`` exactly, or case-insensitively when asked (§3.2)."""
        for column in self.columns:
            if column.name == name:
                return column
        if case_insensitive:
            folded = name.casefold()
            for column in self.columns:
                if column.name.casefold() == folded:
                    return column
        return None


@dataclass(frozen=True, slots=True)
class DiscoveredSchema:
    """What a connector found in a discovery scope.

    ``default_schema`` is the engine default ``d`` of §3.3 as the server reports it (the
    connected database on MySQL, the connected user on Oracle, ``public``/``dbo``/``main``
    elsewhere, ``""`` on MongoDB).
    """

    default_schema: str
    tables: tuple[TableSchema, ...] = ()
