"""Pure discovery rules of the schema routes (contract §2.6.8, §2.6.9, §3.3), over the engine's
table-name rules (``fetcher.engine.names``):

* :func:`schema_scope`: the namespaces ``GET …/schema`` discovers;
* :func:`schema_body`: its response (table names are result keys, sorted; fields sorted by code
  point);
* :func:`requested_scope` and :func:`datasource_errors`: the scope validate-schema discovers for
  one datasource, and its ``TABLE_NOT_FOUND``/``FIELD_NOT_FOUND`` entries in request order.

No I/O happens here; :class:`~fetcher.services.connections.schema_inspection.SchemaInspector`
connects
(through the :class:`~fetcher.services.connections.dialer.ConnectionDialer`), discovers and
caches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fetcher.engine import EngineError
from fetcher.engine.kit import (
    DEFAULT_SCHEMA_MARKER,
    DiscoveredSchema,
    EngineType,
    RequestedTable,
    TableSchema,
    discovery_scope,
    fields_case_insensitive,
    find_table,
    normalize_field,
    parse_table_key,
    static_default_schema,
)
from fetcher.services.api.response_models import SchemaResponse, shape

__all__ = ["datasource_errors", "requested_scope", "schema_body", "schema_scope"]

_SCOPED = frozenset({EngineType.POSTGRESQL, EngineType.SQL_SERVER, EngineType.ORACLE})


def schema_scope(
    engine: EngineType, requested: Sequence[str] | None, default: str | None
) -> list[str]:
    """The scope of ``GET …/schema``: the ``schemas`` parameter, else the connection's
    ``schema``, else the engine default ``d``; ignored (empty) for single-namespace engines."""
    if engine not in _SCOPED:
        return []
    if requested:
        names = list(requested)
    elif default:
        names = [default]
    else:
        names = [static_default_schema(engine) or DEFAULT_SCHEMA_MARKER]
    return [n.upper() for n in names] if engine is EngineType.ORACLE else names


def _result_key(engine: EngineType, table: TableSchema, default_schema: str) -> str:
    requested = table.name if not table.schema else f"{table.schema}.{table.name}"
    parsed = RequestedTable(requested, table.schema or None, table.name)
    if engine is EngineType.MONGODB:
        parsed = RequestedTable(table.name, None, table.name)
    return parsed.result_key(engine, default_schema)


def _types(table: TableSchema) -> dict[str, str]:
    """Field → its native type (its family when the source names none), sorted like
    ``fields``; the first column of a name wins, as ``fields`` holds each name once."""
    types: dict[str, str] = {}
    for column in table.columns:
        types.setdefault(column.name, column.native_type or column.family.value)
    return dict(sorted(types.items()))


def schema_body(
    *,
    connection_id: str,
    config_name: str,
    database_name: str,
    engine: EngineType,
    discovered: DiscoveredSchema,
) -> dict[str, object]:
    """§2.6.8 body: tables keyed as results (§5.2), sorted; fields sorted by code point."""
    tables = sorted(
        (
            {
                "name": _result_key(engine, table, discovered.default_schema),
                "fields": sorted({c.name for c in table.columns}),
                "types": _types(table),
            }
            for table in discovered.tables
        ),
        key=lambda item: str(item["name"]),
    )
    return shape(
        SchemaResponse,
        {
            "id": connection_id,
            "configName": config_name,
            "databaseName": database_name,
            "type": engine.value,
            "tables": tables,
        },
    )


def requested_scope(engine: EngineType, ds: str, tables: Iterable[str]) -> list[str]:
    """§3.3 discovery scope of the requested table keys; invalid keys are left out."""
    parsed: list[RequestedTable] = []
    for key in tables:
        try:
            parsed.append(parse_table_key(engine, key, ds))
        except EngineError:
            continue
    return discovery_scope(engine, parsed)


def datasource_errors(
    ds: str, engine: EngineType, discovered: DiscoveredSchema, tables: Mapping[str, Sequence[str]]
) -> list[dict[str, str]]:
    """``TABLE_NOT_FOUND`` and ``FIELD_NOT_FOUND`` entries in request table and field order.

    ``["*"]`` and empty field lists never produce a field error (§2.6.9).
    """
    errors: list[dict[str, str]] = []
    for key, fields in tables.items():
        try:
            found = find_table(engine, discovered, parse_table_key(engine, key, ds))
        except EngineError:
            found = None
        if found is None:
            errors.append({"type": "TABLE_NOT_FOUND", "dataSourceId": ds, "table": key})
            continue
        insensitive = fields_case_insensitive(engine)
        for field in dict.fromkeys(fields):
            if field == "*":
                continue
            column = found.column_named(
                normalize_field(engine, field), case_insensitive=insensitive
            )
            if column is None:
                errors.append(
                    {"type": "FIELD_NOT_FOUND", "dataSourceId": ds, "table": key, "field": field}
                )
    return errors
