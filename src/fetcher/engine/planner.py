"""Planning: discovery and validation of one job, per datasource (contract §4.3 step 2).

Every datasource is planned (bounded by ``maxConcurrency``) and planning is **not** cancelled
by another datasource's failure. Afterwards: the first datasource (code-point order) that failed
to connect or discover decides the error; otherwise every validation issue of every datasource
is reported in one message, in the §4.5 order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import BoundFieldFilter, FieldFilter
from fetcher.engine.filters.bind import bind_field_filter
from fetcher.engine.filters.mongo import check_mongo_field
from fetcher.engine.mapped_fields import JOB_COUNTS
from fetcher.engine.model import ConnectionDescriptor, ExtractionRequest
from fetcher.engine.names import (
    RequestedTable,
    discovery_scope,
    fields_case_insensitive,
    find_table,
    merge_requested_tables,
    normalize_field,
    parse_table_key,
)
from fetcher.engine.ports import ConnectorRegistry, TableQuery, discover_named
from fetcher.engine.types import Column, DiscoveredSchema, EngineType, TableSchema

__all__ = ["DatasourcePlan", "Plan", "TablePlan", "plan_request"]

#: §3.4: at most 2,000 bound filter values per table, re-checked after the §3.3 merge.
MAX_FILTER_VALUES_PER_TABLE = 2000
SCHEMA_VALIDATION_PREFIX = "extraction request failed schema validation: "


@dataclass(frozen=True, slots=True)
class TablePlan:
    key: str
    query: TableQuery


@dataclass(frozen=True, slots=True)
class DatasourcePlan:
    name: str
    connection: ConnectionDescriptor
    tables: tuple[TablePlan, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """What ``Engine.plan`` returns and ``Engine.execute`` consumes. Its fields are private."""

    request: ExtractionRequest
    datasources: tuple[DatasourcePlan, ...]


@dataclass(slots=True)
class _Planning:
    """One datasource's planning state: the plan so far and its validation issues."""

    name: str
    engine: EngineType
    issues: list[str] = field(default_factory=list)
    queries: dict[str, TableQuery] = field(default_factory=dict)
    #: result keys of every requested table, and the catalog table of each one that exists
    requested_keys: set[str] = field(default_factory=set)
    found: dict[str, TableSchema] = field(default_factory=dict)


async def plan_request(
    request: ExtractionRequest,
    connections: Mapping[str, ConnectionDescriptor],
    registry: ConnectorRegistry,
) -> Plan:
    """Discover and validate every datasource; raise the §4.3 step-2 error or return a plan."""
    _check_datasource_count(request)
    names = sorted(request.mapped_fields)
    gate = asyncio.Semaphore(request.limits.max_concurrency)

    async def one(name: str) -> _Planning | EngineError:
        async with gate:
            try:
                return await _plan_datasource(request, name, connections[name], registry)
            except EngineError as exc:
                return exc

    outcomes = await asyncio.gather(*(one(name) for name in names))
    for outcome in outcomes:
        if isinstance(outcome, EngineError):
            raise outcome
    planned = [o for o in outcomes if isinstance(o, _Planning)]
    issues = [issue for p in planned for issue in p.issues]
    if issues:
        raise EngineError(ErrorCategory.VALIDATION, SCHEMA_VALIDATION_PREFIX + "; ".join(issues))
    return Plan(
        request=request,
        datasources=tuple(
            DatasourcePlan(
                name=p.name,
                connection=connections[p.name],
                tables=tuple(TablePlan(k, p.queries[k]) for k in sorted(p.queries)),
            )
            for p in planned
        ),
    )


def _check_datasource_count(request: ExtractionRequest) -> None:
    maximum = request.limits.max_datasources
    problem = JOB_COUNTS.datasources_over(maximum, len(request.mapped_fields))
    if problem:
        raise EngineError(ErrorCategory.VALIDATION, problem)


async def _plan_datasource(
    request: ExtractionRequest,
    name: str,
    connection: ConnectionDescriptor,
    registry: ConnectorRegistry,
) -> _Planning:
    engine = connection.type
    state = _Planning(name=name, engine=engine)
    tables = request.mapped_fields[name]
    parsed: list[tuple[RequestedTable, Sequence[str]]] = []
    for key, fields in tables.items():
        try:
            parsed.append((parse_table_key(engine, key, name), fields))
        except EngineError as exc:
            state.issues.append(exc.message)
    scope = discovery_scope(engine, (t for t, _ in parsed))
    async with registry.connector_for(connection) as connector:
        discovered = await discover_named(connector, scope, [t.name for t, _ in parsed])
    _check_table_count(request, state, len(tables))
    _plan_tables(request, state, discovered, parsed)
    _plan_filters(request, state, discovered)
    return state


def _check_table_count(request: ExtractionRequest, state: _Planning, count: int) -> None:
    problem = JOB_COUNTS.tables_over(request.limits.max_tables_per_datasource, count, state.name)
    if problem:
        state.issues.append(problem)


def _plan_tables(
    request: ExtractionRequest,
    state: _Planning,
    discovered: DiscoveredSchema,
    parsed: Sequence[tuple[RequestedTable, Sequence[str]]],
) -> None:
    """Resolve every requested table and its fields; record issues in request order."""
    max_fields = request.limits.max_fields_per_table
    resolved: list[tuple[RequestedTable, Sequence[str]]] = []
    for table, fields in parsed:
        where = f"in datasource '{state.name}'"
        key = table.result_key(state.engine, discovered.default_schema)
        state.requested_keys.add(key)
        too_many = JOB_COUNTS.fields_over(max_fields, len(fields), state.name, table.requested)
        if too_many:
            state.issues.append(too_many)
        schema = find_table(state.engine, discovered, table)
        if schema is None:
            state.issues.append(f"table '{table.requested}' not found {where}")
            continue
        state.found[key] = schema
        if not fields:
            state.issues.append(f"table '{table.requested}' {where} selects no fields")
            continue
        problems = _field_problems(state, schema, table, fields)
        if not problems:
            resolved.append((table, fields))
    merged = merge_requested_tables(state.engine, discovered.default_schema, resolved)
    for key, (requested, fields) in merged.items():
        schema = find_table(state.engine, discovered, requested[0])
        if schema is None:  # resolved above: the discovered schema does not change meanwhile
            raise RuntimeError(f"table '{key}' was resolved but is no longer found")
        state.queries[key] = TableQuery(table=schema, columns=_project(state, schema, fields))


def _field_problems(
    state: _Planning, schema: TableSchema, table: RequestedTable, fields: Sequence[str]
) -> bool:
    """Record unknown or unaddressable fields of one requested table; True when any."""
    if list(fields) == ["*"]:
        return False
    found_problem = False
    unaddressable: set[str] = set()  # §3.2: reported by that issue only, never as unknown
    if state.engine is EngineType.MONGODB:
        for f in dict.fromkeys(fields):
            try:
                check_mongo_field(f)
            except EngineError as exc:
                state.issues.append(exc.message)
                unaddressable.add(f)
                found_problem = True
    unknown = [
        f
        for f in dict.fromkeys(fields)
        if f not in unaddressable and _column(state, schema, f) is None
    ]
    if unknown:
        state.issues.append(
            f"unknown fields for table '{table.requested}' in datasource '{state.name}': "
            + ", ".join(unknown)
        )
        found_problem = True
    return found_problem


def _column(state: _Planning, schema: TableSchema, name: str) -> Column | None:
    return schema.column_named(
        normalize_field(state.engine, name),
        case_insensitive=fields_case_insensitive(state.engine),
    )


def _project(state: _Planning, schema: TableSchema, fields: Sequence[str]) -> tuple[Column, ...]:
    """The projected columns in catalog spelling, de-duplicated; ``*`` is every column."""
    if list(fields) == ["*"]:
        return schema.columns
    columns: dict[str, Column] = {}
    for f in fields:
        column = _column(state, schema, f)
        if column is None:  # unknown fields were reported before projection
            raise RuntimeError(f"field '{f}' was checked but is no longer found")
        columns.setdefault(column.name, column)
    return tuple(columns.values())


def _plan_filters(
    request: ExtractionRequest, state: _Planning, discovered: DiscoveredSchema
) -> None:
    """Bind the datasource's filters to discovered columns; merged per result key (§3.4)."""
    bound: dict[str, list[BoundFieldFilter]] = {}
    for table_key, field_filters in request.filters.get(state.name, {}).items():
        where = f"in datasource '{state.name}'"
        try:
            table = parse_table_key(state.engine, table_key, state.name)
        except EngineError as exc:
            state.issues.append(exc.message)
            continue
        key = table.result_key(state.engine, discovered.default_schema)
        if key not in state.requested_keys:
            state.issues.append(
                f"filter references table '{table_key}' that is not selected {where}"
            )
            continue
        if key not in state.found:
            continue  # the table itself was reported as not found
        for field_filter in field_filters:
            item = _bind(state, table_key, state.found[key], field_filter)
            if item is not None:
                bound.setdefault(key, []).append(item)
    for key, filters in bound.items():
        if key not in state.queries:
            continue  # the table has other issues; the job fails anyway
        if sum(len(c.values) for f in filters for c in f.conditions) > MAX_FILTER_VALUES_PER_TABLE:
            state.issues.append(f"too many filter values for '{state.name}.{key}'")
            continue
        query = state.queries[key]
        state.queries[key] = TableQuery(query.table, query.columns, tuple(filters))


def _bind(
    state: _Planning, table_key: str, schema: TableSchema, field_filter: FieldFilter
) -> BoundFieldFilter | None:
    try:
        if state.engine is EngineType.MONGODB:
            check_mongo_field(field_filter.field)
        column = _column(state, schema, field_filter.field)
        if column is None:
            state.issues.append(
                f"filter references unknown field '{field_filter.field}' of table "
                f"'{table_key}' in datasource '{state.name}'"
            )
            return None
        return bind_field_filter(state.name, table_key, column, field_filter)
    except EngineError as exc:
        state.issues.append(exc.message)
        return None
