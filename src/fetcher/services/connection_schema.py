"""Pure rules of the schema routes (contract §2.6.8, §2.6.9, §3.2, §3.3).

* :func:`parse_schemas_param` and :func:`schema_scope`: the ``schemas`` query parameter of
  ``GET …/schema`` and the discovery scope it selects.
* :func:`schema_body`: the §2.6.8 response (table names are result keys, sorted; fields sorted
  by code point).
* :func:`check_validation_body`: the §2.6.9 body checks, in the contract's order.
* :func:`datasource_errors`: the ``TABLE_NOT_FOUND``/``FIELD_NOT_FOUND`` entries of one
  datasource, in request order, using the engine's table-name rules (``fetcher.engine.names``).

No I/O happens here; :class:`~fetcher.services.connections.ConnectionService` connects,
discovers and caches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fetcher.engine.errors import EngineError
from fetcher.engine.names import (
    DEFAULT_SCHEMA_MARKER,
    RequestedTable,
    discovery_scope,
    fields_case_insensitive,
    find_table,
    normalize_field,
    parse_table_key,
    static_default_schema,
)
from fetcher.engine.types import DiscoveredSchema, EngineType, TableSchema
from fetcher.services.errors import (
    ApiError,
    invalid_data_request,
    missing_fields,
    unexpected_fields,
)
from fetcher.services.responses import SchemaResponse, shape
from fetcher.services.shapes import (
    MAX_VALIDATION_DATASOURCES,
    MAX_VALIDATION_FIELDS,
    MAX_VALIDATION_TABLES,
)

__all__ = [
    "VALIDATION_FAILED_MESSAGE",
    "VALIDATION_SUCCESS",
    "ValidationTables",
    "check_validation_body",
    "datasource_errors",
    "parse_schemas_param",
    "requested_scope",
    "schema_body",
    "schema_scope",
]

MAX_SCHEMAS_PARAM = 20
VALIDATION_FAILED_MESSAGE = "Schema validation found inconsistencies."
VALIDATION_SUCCESS: Mapping[str, str] = {
    "status": "success",
    "message": "Schema validated successfully. All datasources, tables, and fields exist.",
}
_SCOPED = frozenset({EngineType.POSTGRESQL, EngineType.SQL_SERVER, EngineType.ORACLE})

#: ``{configName: {table: [field, …]}}`` as sent, checked by :func:`check_validation_body`.
ValidationTables = Mapping[str, Mapping[str, Sequence[str]]]


# --- GET …/schema (§2.6.8) ----------------------------------------------------------------


def parse_schemas_param(raw: str | None) -> list[str] | None:
    """``schemas``: 1–20 comma-separated non-blank names (trimmed), else ``400 FET-0405``."""
    if raw is None:
        return None
    names = [name.strip() for name in raw.split(",")]
    if not 1 <= len(names) <= MAX_SCHEMAS_PARAM or not all(names):
        raise ApiError(
            "FET-0405", "schemas must be a comma-separated list of 1 to 20 non-blank schema names"
        )
    return list(dict.fromkeys(names))


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


# --- POST …/validate-schema (§2.6.9) ------------------------------------------------------


def check_validation_body(body: Mapping[str, object]) -> ValidationTables:
    """§2.6.9 body checks in order; the first failing one raises its ``ApiError``."""
    unknown = [key for key in body if key != "mappedFields"]
    if unknown:
        raise unexpected_fields(unknown)
    mapped = body.get("mappedFields")
    if mapped is None:
        raise missing_fields(["mappedFields"])
    shaped = _check_shape(mapped)
    if not shaped:
        raise invalid_data_request("mappedFields cannot be empty")
    _check_counts(shaped)
    _check_names(shaped)
    return shaped


def _check_shape(mapped: object) -> dict[str, dict[str, list[str]]]:
    """An object of objects of string arrays, else ``400 FET-0401``."""
    message = "mappedFields must be an object of datasources to objects of field arrays"
    if not isinstance(mapped, dict):
        raise invalid_data_request(message)
    for tables in mapped.values():
        if not isinstance(tables, dict):
            raise invalid_data_request(message)
        for fields in tables.values():
            if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
                raise invalid_data_request(message)
    return mapped


def _check_counts(mapped: ValidationTables) -> None:
    if len(mapped) > MAX_VALIDATION_DATASOURCES:
        raise ApiError(
            "FET-1061",
            f"maximum {MAX_VALIDATION_DATASOURCES} datasources allowed per validation request",
        )
    for ds, tables in mapped.items():
        if len(tables) > MAX_VALIDATION_TABLES:
            raise ApiError(
                "FET-1061",
                f"maximum {MAX_VALIDATION_TABLES} tables allowed per datasource, "
                f"got {len(tables)} for '{ds}'",
            )
    for ds, tables in mapped.items():
        for table, fields in tables.items():
            if len(fields) > MAX_VALIDATION_FIELDS:
                raise ApiError(
                    "FET-1061",
                    f"maximum {MAX_VALIDATION_FIELDS} fields allowed per table, "
                    f"got {len(fields)} for '{ds}.{table}'",
                )


def _name_ok(name: str) -> bool:
    return bool(name.strip()) and name == name.strip()


def _check_names(mapped: ValidationTables) -> None:
    """Blank or whitespace-padded names, or ``*`` mixed with other entries → FET-0401."""
    for ds, tables in mapped.items():
        if not _name_ok(ds):
            raise invalid_data_request(f"datasource name '{ds}' must not be blank or padded")
        for table, fields in tables.items():
            if not _name_ok(table):
                raise invalid_data_request(
                    f"table name '{table}' in datasource '{ds}' must not be blank or padded"
                )
            for field in fields:
                if not _name_ok(field):
                    raise invalid_data_request(
                        f"field name '{field}' in '{ds}.{table}' must not be blank or padded"
                    )
            if "*" in fields and len(fields) > 1:
                raise invalid_data_request(
                    f"wildcard '*' must be the only entry in the field list for '{ds}.{table}'"
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
