"""The job list queries of both metadata stores (``GET /v1/fetcher``, issue 21).

One WHERE clause for both dialects, built from
:class:`~fetcher.services.store_roles.JobSearchQuery`:
the tenant (§12.5), statuses, products (§12.4 and ``X-Product-Name``), a stored connection
(``job_connections``, filled by a trigger of migration 0003 from ``connection_ids_json``, and
then the page's source), an internal datasource (``job_datasources``), a creation window, and
the keyset position
``(created_at, id) < (:after_at, :after_id)`` written as a row value, which both PostgreSQL and
SQLite turn into a range of one of the ``(tenant_id, [status | product,] created_at, id)``
indexes of migration 0003, scanned backward. A page thus reads about ``limit`` index entries
whatever its depth.

Written once in the store's shared ``:name`` spelling over its :class:`~._dialect.Dialect`
(timestamps, the false literal); only the JSON look-up of an internal datasource differs, and
is spelt here per backend. :meth:`SqlMetadataStore.search_jobs` runs it on the store's own
connection handling (the PostgreSQL pool and its recovery, the SQLite connection and its lock).
"""

# S608: SQL text is assembled only from this module's constants and placeholder names; every
# value is a bound parameter.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fetcher.adapters.store import _common as c
from fetcher.adapters.store._dialect import Dialect
from fetcher.adapters.store._program import Statement
from fetcher.services.store_roles import JobSearchQuery

__all__ = ["CUT_FLAGS", "over_limit", "search_statement"]

#: Per backend: the SQL that is true when ``connection_ids_json`` has no entry for the named
#: datasource (a ``:name`` placeholder).
_NO_STORED_ENTRY: dict[str, Callable[[str], str]] = {
    "postgres": lambda ds: f"(j.connection_ids_json::json ->> {ds}) IS NULL",
    # configName characters ([A-Za-z0-9_-]) need no escaping inside a quoted JSON path.
    "sqlite": lambda ds: f"json_extract(j.connection_ids_json, '$.\"' || {ds} || '\"') IS NULL",
}


def _in(column: str, values: Sequence[str], prefix: str, d: Dialect) -> tuple[str, dict[str, Any]]:
    if not values:
        return d.false, {}
    marks = ", ".join(f":{prefix}{i}" for i in range(len(values)))
    clause = f"{column} = {marks}" if len(values) == 1 else f"{column} IN ({marks})"
    return clause, {f"{prefix}{i}": value for i, value in enumerate(values)}


@dataclass(frozen=True, slots=True)
class _Source:
    """Where a page's rows and order come from: ``jobs``, or, for one stored connection, its
    ``job_connections`` rows (which copy the job's tenant and creation time, so that their
    ``(connection_id, tenant_id, created_at, job_id)`` index yields the page in order)."""

    tables: str
    tenant: str
    created: str
    id: str


_JOBS = _Source("jobs j", "j.tenant_id", "j.created_at", "j.id")
_BY_CONNECTION = _Source(
    "job_connections jc JOIN jobs j ON j.id = jc.job_id",
    "jc.tenant_id",
    "jc.created_at",
    "jc.job_id",
)
#: Per backend: the length in bytes of a TEXT column, and what a cut ``metadata`` becomes:
#: ``{"source": <the job's product>}``, the normalized source (§3.7) from its own column, so
#: that no large document is parsed to cut it.
_BYTES: dict[str, Callable[[str], str]] = {
    "postgres": lambda col: f"octet_length({col})",
    "sqlite": lambda col: f"length(CAST({col} AS BLOB))",
}


def over_limit(d: Dialect, column: str) -> str:
    """SQL that is true when the TEXT ``column`` holds more than ``:doc_max`` bytes (UTF-8)
    (false for ``NULL``): the list reads of both stores cut such documents in the database."""
    return f"COALESCE({_BYTES[d.name](column)} > :doc_max, {d.false})"


_SOURCE_ONLY: dict[str, str] = {
    "postgres": "json_build_object('source', j.product)::text",
    "sqlite": "json_object('source', j.product)",
}
#: The documents a page may leave out: column, what replaces it, and the flag column naming it.
_CUT_COLUMNS = ("mapped_fields_json", "filters_json", "metadata_json")
CUT_FLAGS = {
    "mapped_fields_json": "cut_mapped_fields",
    "filters_json": "cut_filters",
    "metadata_json": "cut_metadata",
}


def _columns(d: Dialect) -> str:
    """:data:`~._common.JOB_COLUMNS` of ``j``, with each document over ``:doc_max`` bytes
    replaced in the database (so a page never carries it to the process) and flagged:
    ``mappedFields`` by ``{}``, ``filters`` by ``NULL``, ``metadata`` by ``{"source": product}``."""
    columns = []
    for name in (n.strip() for n in c.JOB_COLUMNS.split(",")):
        if name not in _CUT_COLUMNS:
            columns.append(f"j.{name}")
            continue
        col = f"j.{name}"
        over = over_limit(d, col)
        short = {"mapped_fields_json": "'{}'", "filters_json": "NULL"}.get(name)
        replacement = short if short is not None else _SOURCE_ONLY[d.name]
        columns.append(f"CASE WHEN {over} THEN {replacement} ELSE {col} END AS {name}")
        columns.append(f"{over} AS {CUT_FLAGS[name]}")
    return ", ".join(columns)


def _where(
    query: JobSearchQuery, d: Dialect, src: _Source, tag: str = ""
) -> tuple[str, dict[str, Any]]:
    """The page's predicate; ``tag`` makes the status and product placeholders of one branch
    of a fanned-out page (:func:`_fan_out`) distinct from the others'."""
    clauses = [f"{src.tenant} = :tenant"]
    params: dict[str, Any] = {"tenant": query.tenant}
    if query.connection_id is not None:
        clauses.append("jc.connection_id = :cid")
        params["cid"] = query.connection_id
    if query.statuses:
        clause, values = _in("j.status", sorted(query.statuses), f"s{tag}_", d)
        clauses.append(clause)
        params.update(values)
    if query.products is not None:
        clause, values = _in("j.product", sorted(query.products), f"p{tag}_", d)
        clauses.append(clause)
        params.update(values)
    if query.datasource is not None:
        clauses.append(
            "j.id IN (SELECT job_id FROM job_datasources WHERE config_name = :ds)"
            f" AND {_NO_STORED_ENTRY[d.name](':ds')}"
        )
        params["ds"] = query.datasource
    if query.created_from is not None:
        clauses.append(f"{src.created} >= :created_from")
        params["created_from"] = d.ts(query.created_from)
    if query.created_before is not None:
        clauses.append(f"{src.created} < :created_before")
        params["created_before"] = d.ts(query.created_before)
    if query.after is not None:
        clauses.append(f"({src.created}, {src.id}) < (:after_at, :after_id)")
        params["after_at"], params["after_id"] = d.ts(query.after[0]), query.after[1]
    return " AND ".join(clauses), params


#: A restricted token's products are fanned out (one index range each) up to this many.
MAX_FANNED_PRODUCTS = 32


def _fan_out(query: JobSearchQuery) -> list[JobSearchQuery] | None:
    """One query per status (several statuses), else per product (a restricted token's
    several products), or ``None`` for a single range. ``status IN (a, b)`` cannot keep the
    ``(tenant_id, status, created_at, id)`` order, so a planner would walk the tenant's whole
    listing index and test each row; each branch instead reads at most ``limit`` entries of
    one range, and only those are merged."""
    if query.connection_id is not None:
        return None  # the connection's own range already holds the order
    if len(query.statuses) > 1:
        return [replace(query, statuses=frozenset({s})) for s in sorted(query.statuses)]
    products = query.products or frozenset()
    if 1 < len(products) <= MAX_FANNED_PRODUCTS:
        return [replace(query, products=frozenset({p})) for p in sorted(products)]
    return None


def search_statement(query: JobSearchQuery, d: Dialect) -> Statement:
    """One page's statement on the backend of ``d``; public so that a test can ask either
    planner which index serves it."""
    src = _JOBS if query.connection_id is None else _BY_CONNECTION
    order = f" ORDER BY {src.created} DESC, {src.id} DESC LIMIT :limit"
    params: dict[str, Any] = {"limit": query.limit, "doc_max": query.max_document_bytes}
    branches = _fan_out(query)
    if branches is None:
        where, values = _where(query, d, src)
        params.update(values)
        return Statement(f"SELECT {_columns(d)} FROM {src.tables} WHERE {where}{order}", params)
    parts = []
    for n, branch in enumerate(branches):
        where, values = _where(branch, d, src, tag=str(n))
        params.update(values)
        inner = f"SELECT {_columns(d)} FROM {src.tables} WHERE {where}{order}"
        parts.append(f"SELECT * FROM ({inner}) AS b{n}")
    union = " UNION ALL ".join(parts)
    sql = f"SELECT * FROM ({union}) AS page ORDER BY created_at DESC, id DESC LIMIT :limit"
    return Statement(sql, params)
