"""Table names: parsing, result keys, merging and discovery scope (contract §3.3).

A requested table key is parsed per engine into ``(schema, table)``; its **result key** is the
table alone when the schema is the engine default ``d`` (compared case-insensitively), else
``schema.table``, upper-cased on Oracle; MongoDB keys are verbatim. Requested keys with the same
result key are merged before discovery. Catalog matching follows the engine's casing rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.types import DiscoveredSchema, EngineType, TableSchema

__all__ = [
    "RequestedTable",
    "discovery_scope",
    "find_table",
    "merge_requested_tables",
    "parse_table_key",
    "static_default_schema",
]

#: Engines whose default schema is a fixed name; MySQL and Oracle learn theirs at connect.
_STATIC_DEFAULTS: Mapping[EngineType, str] = {
    EngineType.POSTGRESQL: "public",
    EngineType.SQL_SERVER: "dbo",
    EngineType.SQLITE: "main",
}
#: Engines whose discovery takes a schema list (§3.3 "Discovery scope").
_SCHEMA_SCOPED = frozenset({EngineType.POSTGRESQL, EngineType.SQL_SERVER, EngineType.ORACLE})
#: Engines whose table names match case-insensitively (§3.3 "Catalog matching").
_CASE_INSENSITIVE = frozenset({EngineType.MYSQL, EngineType.SQLITE})

#: In a discovery scope, this stands for "the engine default schema" on Oracle, where only
#: the connector knows the connected user (§3.3).
DEFAULT_SCHEMA_MARKER = ""


def static_default_schema(engine: EngineType) -> str | None:
    """``d`` when it does not depend on the session: public, dbo, main; else ``None``."""
    return _STATIC_DEFAULTS.get(engine)


@dataclass(frozen=True, slots=True)
class RequestedTable:
    """One requested table key, parsed. ``schema`` is ``None`` when the key is unqualified."""

    requested: str
    schema: str | None
    name: str

    def result_key(self, engine: EngineType, default_schema: str) -> str:
        """§3.3 "Result key": strip ``d`` (case-insensitively), upper-case on Oracle."""
        if engine is EngineType.MONGODB:
            return self.requested
        if self.schema is None or self.schema.casefold() == default_schema.casefold():
            key = self.name
        else:
            key = f"{self.schema}.{self.name}"
        return key.upper() if engine is EngineType.ORACLE else key


def parse_table_key(engine: EngineType, key: str, datasource: str) -> RequestedTable:
    """Parse a requested table key (§3.3 "Parsing"); more than one dot is invalid."""
    if engine is EngineType.MONGODB:
        return RequestedTable(key, None, key)
    parts = key.split(".")
    if len(parts) == 1:
        return RequestedTable(key, None, key)
    if len(parts) == 2 and all(parts):
        return RequestedTable(key, parts[0], parts[1])
    raise EngineError(
        ErrorCategory.VALIDATION, f"invalid table name '{key}' in datasource '{datasource}'"
    )


def merge_requested_tables(
    engine: EngineType, default_schema: str, tables: Iterable[tuple[RequestedTable, Sequence[str]]]
) -> dict[str, tuple[list[RequestedTable], list[str]]]:
    """Merge requested tables by result key: fields concatenated and de-duplicated (first
    occurrence kept), and ``*`` wins (§3.3). Returns key → (the requested tables, fields)."""
    merged: dict[str, tuple[list[RequestedTable], list[str]]] = {}
    for table, fields in tables:
        key = table.result_key(engine, default_schema)
        requested, merged_fields = merged.setdefault(key, ([], []))
        requested.append(table)
        for field in fields:
            if field not in merged_fields:
                merged_fields.append(field)
    for _requested, merged_fields in merged.values():
        if "*" in merged_fields:
            merged_fields[:] = ["*"]
    return merged


def discovery_scope(engine: EngineType, tables: Iterable[RequestedTable]) -> list[str]:
    """§3.3 "Discovery scope": the distinct schema prefixes (upper-cased on Oracle), plus
    ``d`` when any key is unqualified or qualified with ``d``. Engines with one namespace get
    ``[]``. On Oracle ``d`` is :data:`DEFAULT_SCHEMA_MARKER`; the connector resolves it."""
    if engine not in _SCHEMA_SCOPED:
        return []
    default = static_default_schema(engine)
    scope: set[str] = set()
    for table in tables:
        schema = table.schema
        if schema is None or (default is not None and schema.casefold() == default.casefold()):
            scope.add(default if default is not None else DEFAULT_SCHEMA_MARKER)
        else:
            scope.add(schema.upper() if engine is EngineType.ORACLE else schema)
    return sorted(scope)


def find_table(
    engine: EngineType, discovered: DiscoveredSchema, table: RequestedTable
) -> TableSchema | None:
    """Match a requested table against the catalog (§3.3 "Catalog matching")."""
    default = discovered.default_schema
    schema = table.schema
    if schema is None or schema.casefold() == default.casefold():
        schema = default
    name = table.name
    if engine is EngineType.ORACLE:
        schema, name = schema.upper(), name.upper()
    for candidate in discovered.tables:
        if engine in _CASE_INSENSITIVE:
            if candidate.name.casefold() == name.casefold() and (
                candidate.schema.casefold() == schema.casefold()
            ):
                return candidate
        elif candidate.schema == schema and candidate.name == name:
            return candidate
    return None


def fields_case_insensitive(engine: EngineType) -> bool:
    """§3.2 "Field matching": case-insensitive on MySQL and SQLite."""
    return engine in _CASE_INSENSITIVE


def normalize_field(engine: EngineType, field: str) -> str:
    """On Oracle a requested field is upper-cased before exact matching (§3.2)."""
    return field.upper() if engine is EngineType.ORACLE else field
