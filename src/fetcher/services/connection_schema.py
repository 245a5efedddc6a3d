"""The request shapes of the schema routes (contract §2.6.8, §2.6.9, §3.2).

* :func:`parse_schemas_param`: the ``schemas`` query parameter of ``GET …/schema``.
* :func:`check_validation_body`: the §2.6.9 body checks, in the contract's order.

The discovery rules these routes then apply are in :mod:`fetcher.services.schema_discovery`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fetcher.services.errors import (
    ApiError,
    invalid_data_request,
    missing_fields,
)
from fetcher.services.shapes import (
    MAX_VALIDATION_DATASOURCES,
    MAX_VALIDATION_FIELDS,
    MAX_VALIDATION_TABLES,
    SCHEMAS_PARAM,
    Invalid,
    is_field_list,
    name_problem,
    reject_unknown_fields,
    wildcard_problem,
)

__all__ = [
    "VALIDATION_FAILED_MESSAGE",
    "VALIDATION_SUCCESS",
    "ValidationTables",
    "check_validation_body",
    "parse_schemas_param",
]

VALIDATION_FAILED_MESSAGE = "Schema validation found inconsistencies."
VALIDATION_SUCCESS: Mapping[str, str] = {
    "status": "success",
    "message": "Schema validated successfully. All datasources, tables, and fields exist.",
}

#: ``{configName: {table: [field, …]}}`` as sent, checked by :func:`check_validation_body`.
ValidationTables = Mapping[str, Mapping[str, Sequence[str]]]


def parse_schemas_param(raw: str | None) -> list[str] | None:
    """``schemas`` (:data:`~fetcher.services.shapes.SCHEMAS_PARAM`), else ``400 FET-0405``."""
    if raw is None:
        return None
    try:
        return SCHEMAS_PARAM.check(raw)
    except Invalid as exc:
        raise ApiError("FET-0405", exc.message) from None


# --- POST …/validate-schema (§2.6.9) ------------------------------------------------------


def check_validation_body(body: Mapping[str, object]) -> ValidationTables:
    """§2.6.9 body checks in order; the first failing one raises its ``ApiError``."""
    reject_unknown_fields(body, {"mappedFields": None})
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
        if not all(is_field_list(fields) for fields in tables.values()):
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


def _check_names(mapped: ValidationTables) -> None:
    """Blank or whitespace-padded names, or ``*`` mixed with other entries → FET-0401."""
    for ds, tables in mapped.items():
        if name_problem(ds):
            raise invalid_data_request(f"datasource name '{ds}' must not be blank or padded")
        for table, fields in tables.items():
            if name_problem(table):
                raise invalid_data_request(
                    f"table name '{table}' in datasource '{ds}' must not be blank or padded"
                )
            for field in fields:
                if name_problem(field):
                    raise invalid_data_request(
                        f"field name '{field}' in '{ds}.{table}' must not be blank or padded"
                    )
            problem = wildcard_problem(ds, table, fields)
            if problem:
                raise invalid_data_request(problem)
