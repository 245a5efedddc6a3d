"""Manager-side validation of a ``POST /v1/fetcher`` body (contract §3.1-§3.6, §3.8).

:func:`validate_job_request` runs §3.6 steps 3-12 in order on a body that ``parse_json_object``
has already decoded (steps 1-2); the first failing step raises its :class:`ApiError`. On
success it returns a :class:`ValidatedJob` with the request hash of §3.8. Table, field and
filter-reference checks against a schema belong to the Worker and are not made here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import cast

from fetcher.engine import EngineError, Limits
from fetcher.engine.kit import (
    JOB_COUNTS,
    LIMIT_NAMES,
    FilterReferenceError,
    FilterSpec,
    MappedFieldsChecks,
    first_mapped_fields_problem,
    parse_filters,
)
from fetcher.services.access import require_product
from fetcher.services.api.shapes import (
    MAX_FIELD_NAME,
    MAX_TABLE_NAME,
    SOURCE,
    Invalid,
    KnownFields,
    is_field_list,
    metadata_error,
    metadata_problems,
    name_problem,
    reject_unknown_fields,
    wildcard_problem,
)
from fetcher.services.errors import (
    ApiError,
    Title,
    invalid_data_request,
    invalid_filter_references,
    missing_fields,
)
from fetcher.services.jobs.request_hash import canonical_request, request_hash
from fetcher.services.principal import ANONYMOUS, Principal

__all__ = ["MappedFields", "ValidatedJob", "validate_job_request"]

#: ``{configName: {table: [field, …]}}`` as submitted.
MappedFields = Mapping[str, Mapping[str, list[str]]]

#: §3.1 properties (step 3).
_KNOWN: KnownFields = {
    "dataRequest": {"mappedFields": None, "filters": None, "limits": dict.fromkeys(LIMIT_NAMES)},
    "metadata": None,
}
_NO_FILTERS: FilterSpec = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ValidatedJob:
    """A job body that passed §3.6 steps 3-12.

    ``mapped_fields`` and ``metadata`` are as submitted; ``raw_filters`` and ``raw_limits`` are
    the submitted objects when non-empty, else ``None``; ``limits`` are the effective limits;
    ``source`` is ``lower(trim(metadata.source))`` (§3.7).
    """

    mapped_fields: MappedFields
    filters: FilterSpec
    limits: Limits
    metadata: Mapping[str, object]
    source: str
    request_hash: str
    raw_filters: Mapping[str, object] | None = None
    raw_limits: Mapping[str, object] | None = None


def validate_job_request(
    body: Mapping[str, object], *, max_limits: Limits, principal: Principal = ANONYMOUS
) -> ValidatedJob:
    """Run §3.6 steps 3-12 on ``body`` against the configured maxima ``max_limits``, with
    step 10a (§12.4) for a product-restricted ``principal``."""
    reject_unknown_fields(body, _KNOWN)  # step 3: top level, dataRequest and limits
    data_request, raw_mapped = _check_mapped_fields_present(body)  # steps 4, 4a
    mapped = _check_mapped_fields_shape(raw_mapped)  # step 5
    raw_limits = _non_empty_object(data_request.get("limits"), "limits")
    limits = _effective_limits(raw_limits, max_limits)  # step 6
    _check_counts(mapped, limits)  # step 7
    metadata, source = _check_metadata(body, principal)  # steps 8-11
    raw_filters = _non_empty_object(data_request.get("filters"), "filters")
    filters = _parse_filters(raw_filters, mapped)  # step 12
    canonical = canonical_request(mapped, metadata, filters=raw_filters, limits=raw_limits)
    return ValidatedJob(
        mapped_fields=mapped,
        filters=filters,
        limits=limits,
        metadata=metadata,
        source=source,
        request_hash=request_hash(canonical),
        raw_filters=raw_filters,
        raw_limits=raw_limits,
    )


# --- steps 4 and 4a -----------------------------------------------------------------------


def _check_mapped_fields_present(
    body: Mapping[str, object],
) -> tuple[Mapping[str, object], dict[str, object]]:
    """Steps 4 and 4a: ``dataRequest`` and ``mappedFields`` present, non-null, objects."""
    data_request = body.get("dataRequest")
    if data_request is None:
        raise missing_fields(["dataRequest"])
    if isinstance(data_request, dict) and data_request.get("mappedFields") is None:
        raise missing_fields(["dataRequest.mappedFields"])
    if not isinstance(data_request, dict):
        raise invalid_data_request("dataRequest must be an object")
    mapped = data_request["mappedFields"]
    if not isinstance(mapped, dict):
        raise invalid_data_request("mappedFields must be an object")
    return data_request, mapped


# --- step 5: the §3.2 rules, as one walk of the tree -------------------------------------


def _named(name: str, what: str, limit: int | None = None) -> str | None:
    """§3.2 name rule: non-blank, no surrounding whitespace, at most ``limit`` characters."""
    problem = name_problem(name)
    if problem == "blank":
        return f"{what} must not be blank"
    if problem == "padded":
        return f"{what} '{name}' must not have leading or trailing whitespace"
    if limit is not None and len(name) > limit:
        return f"{what} '{name}' must not exceed {limit} characters"
    return None


def _datasource(ds: str, tables: object) -> str | None:
    problem = _named(ds, "datasource name")
    if problem or isinstance(tables, dict):
        return problem
    return f"mappedFields for datasource '{ds}' must be an object"


def _table(ds: str, table: str, entries: object) -> str | None:
    problem = _named(table, f"table name in datasource '{ds}'", MAX_TABLE_NAME)
    if problem or is_field_list(entries):
        return problem
    return f"fields of '{ds}.{table}' must be an array of strings"


def _selects_fields(ds: str, tables: Mapping[str, object]) -> str | None:
    if any(tables.values()):
        return None
    return f"datasource '{ds}' must have at least one table with fields"


#: Step 5 (§3.2): datasource by datasource, its name and object, then each table's name, field
#: list, field names and wildcard, then the empty-datasource rule.
_SHAPE = MappedFieldsChecks(
    tree=lambda mapped: None if mapped else "mappedFields cannot be empty",
    datasource=_datasource,
    table=_table,
    entry=lambda ds, table, entry: _named(entry, f"field name in '{ds}.{table}'", MAX_FIELD_NAME),
    table_done=wildcard_problem,
    datasource_done=_selects_fields,
)


def _check_mapped_fields_shape(mapped: Mapping[str, object]) -> MappedFields:
    """Step 5: §3.2 shape, names, wildcard and empty-datasource rules, datasource by datasource."""
    problem = first_mapped_fields_problem(mapped, _SHAPE)
    if problem:
        raise invalid_data_request(problem)
    return cast(MappedFields, mapped)


# --- steps 6 and 7 ------------------------------------------------------------------------


def _non_empty_object(value: object, name: str) -> dict[str, object] | None:
    """``null`` or ``{}`` → ``None``; another non-object → FET-0401."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid_data_request(f"{name} must be an object")
    return value or None


def _effective_limits(raw: Mapping[str, object] | None, max_limits: Limits) -> Limits:
    """Step 6: §3.5 lowering rules; the engine's messages are the contract's."""
    try:
        return max_limits.lowered(raw)
    except EngineError as exc:
        raise invalid_data_request(exc.message) from exc


def _check_counts(mapped: MappedFields, limits: Limits) -> None:
    """Step 7: §3.5 counts against the effective limits (fields counted before dedup), in the
    planner's words (:data:`~fetcher.engine.mapped_fields.JOB_COUNTS`)."""
    maxima = (limits.max_datasources, limits.max_tables_per_datasource, limits.max_fields_per_table)
    problem = JOB_COUNTS.first_problem(mapped, *maxima)
    if problem:
        raise invalid_data_request(problem)


# --- steps 8 to 11 ------------------------------------------------------------------------


def _check_metadata(
    body: Mapping[str, object], principal: Principal
) -> tuple[dict[str, object], str]:
    """Steps 8-11: ``metadata`` object, ``metadata.source`` present and non-blank, the
    restricted token's products (10a), flatness."""
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):  # step 8
        raise _metadata_field("metadata", "metadata is required and must contain 'source' field")
    source = metadata.get("source")
    if source is None:  # step 9
        raise _metadata_field(
            "metadata.source", "metadata.source is required for job notification routing"
        )
    try:
        normalized = SOURCE.check(source)  # step 10
    except Invalid as exc:
        raise _metadata_field("metadata.source", exc.message, Title.INVALID_FIELD_VALUE) from None
    require_product(principal, normalized)  # step 10a (§12.4)
    problems = metadata_problems(metadata)
    if problems:
        raise metadata_error(problems)
    return metadata, normalized


def _metadata_field(path: str, message: str, title: str = Title.MISSING_REQUIRED_FIELD) -> ApiError:
    """Steps 8-10: FET-0402 with the §2.3 title the step selects."""
    return ApiError("FET-0402", message, fields={path: message}, title=title)


# --- step 12 ------------------------------------------------------------------------------


def _parse_filters(raw: Mapping[str, object] | None, mapped: MappedFields) -> FilterSpec:
    """Step 12: §3.4 filter shape, operators, arity, value counts and datasource references."""
    if raw is None:
        return _NO_FILTERS
    try:
        return parse_filters(raw, mapped)
    except FilterReferenceError as exc:
        raise invalid_filter_references(exc.message) from exc
    except EngineError as exc:
        raise invalid_data_request(exc.message) from exc
