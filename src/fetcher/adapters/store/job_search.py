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
from dataclasses import dataclass
from typing import Any

from fetcher.adapters.store import _common as c
from fetcher.adapters.store._dialect import Dialect
from fetcher.adapters.store._program import Statement
from fetcher.services.store_roles import JobSearchQuery

__all__ = ["search_statement"]

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
_COLUMNS = ", ".join(f"j.{name.strip()}" for name in c.JOB_COLUMNS.split(","))


def _where(query: JobSearchQuery, d: Dialect, src: _Source) -> tuple[str, dict[str, Any]]:
    clauses = [f"{src.tenant} = :tenant"]
    params: dict[str, Any] = {"tenant": query.tenant}
    if query.connection_id is not None:
        clauses.append("jc.connection_id = :cid")
        params["cid"] = query.connection_id
    if query.statuses:
        clause, values = _in("j.status", sorted(query.statuses), "s", d)
        clauses.append(clause)
        params.update(values)
    if query.products is not None:
        clause, values = _in("j.product", sorted(query.products), "p", d)
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


def search_statement(query: JobSearchQuery, d: Dialect) -> Statement:
    """One page's statement on the backend of ``d``; public so that a test can ask either
    planner which index serves it."""
    src = _JOBS if query.connection_id is None else _BY_CONNECTION
    where, params = _where(query, d, src)
    params["limit"] = query.limit
    sql = (
        f"SELECT {_COLUMNS} FROM {src.tables} WHERE {where}"
        f" ORDER BY {src.created} DESC, {src.id} DESC LIMIT :limit"
    )
    return Statement(sql, params)
