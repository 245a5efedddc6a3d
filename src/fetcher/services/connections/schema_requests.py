"""The request shapes of the schema routes (contract §2.6.8, §2.6.9, §3.2).

* :func:`parse_schemas_param`: the ``schemas`` query parameter of ``GET …/schema``.
* :func:`check_validation_body`: the §2.6.9 body checks, in the contract's order.

The discovery rules these routes then apply are in
:mod:`fetcher.services.connections.schema_discovery`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from fetcher.engine.kit import VALIDATION_COUNTS, MappedFieldsChecks, first_mapped_fields_problem
from fetcher.services.api.shapes import (
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
from fetcher.services.errors import (
    ApiError,
    invalid_data_request,
    missing_fields,
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
    """``schemas`` (:data:`~fetcher.services.api.shapes.SCHEMAS_PARAM`), else ``400 FET-0405``."""
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
    problem = first_mapped_fields_problem(mapped, _SHAPE)
    if problem:
        raise invalid_data_request(problem)
    counted = VALIDATION_COUNTS.first_problem(
        mapped, MAX_VALIDATION_DATASOURCES, MAX_VALIDATION_TABLES, MAX_VALIDATION_FIELDS
    )
    if counted:
        raise ApiError("FET-1061", counted)
    problem = first_mapped_fields_problem(mapped, _NAMES)
    if problem:
        raise invalid_data_request(problem)
    return cast(ValidationTables, mapped)


# The §2.6.9 check table as walks of the tree: the shape (one message for every level), then
# empty, the counts (FET-1061, VALIDATION_COUNTS) and the names.

_NOT_SHAPED = "mappedFields must be an object of datasources to objects of field arrays"


def _shaped_tree(mapped: object) -> str | None:
    if not isinstance(mapped, dict):
        return _NOT_SHAPED
    return None if mapped else "mappedFields cannot be empty"  # after the shape: nothing to walk


_SHAPE = MappedFieldsChecks(
    tree=_shaped_tree,
    datasource=lambda _, tables: None if isinstance(tables, dict) else _NOT_SHAPED,
    table=lambda _, __, fields: None if is_field_list(fields) else _NOT_SHAPED,
)


def _unpadded(name: str, what: str) -> str | None:
    """§3.2 names: non-blank and unpadded, else FET-0401 naming ``what``."""
    return f"{what} must not be blank or padded" if name_problem(name) else None


_NAMES = MappedFieldsChecks(
    datasource=lambda ds, _: _unpadded(ds, f"datasource name '{ds}'"),
    table=lambda ds, table, _: _unpadded(table, f"table name '{table}' in datasource '{ds}'"),
    entry=lambda ds, table, field: _unpadded(field, f"field name '{field}' in '{ds}.{table}'"),
    table_done=wildcard_problem,
)
