"""The job list queries of both metadata stores (``GET /v1/fetcher``, issue 21).

One WHERE clause for both dialects, built from :class:`~fetcher.services.ports.JobSearchQuery`:
the tenant (§12.5), statuses, products (§12.4 and ``X-Product-Name``), a stored connection
(``job_connections``, filled by a trigger of migration 0003 from ``connection_ids_json``, and
then the page's source), an internal datasource (``job_datasources``), a creation window, and
the keyset position
``(created_at, id) < (:after_at, :after_id)`` written as a row value, which both PostgreSQL and
SQLite turn into a range of one of the ``(tenant_id, [status | product,] created_at, id)``
indexes of migration 0003, scanned backward. A page thus reads about ``limit`` index entries
whatever its depth.

The adapters share their store's connection handling (the PostgreSQL pool and its recovery, the
SQLite connection and its lock): each store hands one out through ``job_search()``.
"""

# S608: SQL text is assembled only from this module's constants and placeholder names; every
# value is a bound parameter.
# ruff: noqa: S608

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from fetcher.adapters.store import _common as c
from fetcher.services.ports import JobSearchQuery
from fetcher.services.records import JobRecord

__all__ = ["PostgresJobSearch", "SqliteJobSearch", "search_sql"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Dialect:
    param: Callable[[str], str]
    ts: Callable[[datetime], Any]
    never: str
    #: The SQL that is true when ``connection_ids_json`` has no entry for the named datasource.
    no_stored_entry: Callable[[str], str]


_POSTGRES = _Dialect(
    param=lambda name: f"%({name})s",
    ts=c.utc_ms,
    never="false",
    no_stored_entry=lambda ds: f"(j.connection_ids_json::json ->> {ds}) IS NULL",
)
_SQLITE = _Dialect(
    param=lambda name: f":{name}",
    ts=c.ts_text,
    never="0 = 1",
    # configName characters ([A-Za-z0-9_-]) need no escaping inside a quoted JSON path.
    no_stored_entry=lambda ds: (
        f"json_extract(j.connection_ids_json, '$.\"' || {ds} || '\"') IS NULL"
    ),
)


def _in(column: str, values: Sequence[str], prefix: str, d: _Dialect) -> tuple[str, dict[str, Any]]:
    if not values:
        return d.never, {}
    marks = ", ".join(d.param(f"{prefix}{i}") for i in range(len(values)))
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


def _where(query: JobSearchQuery, d: _Dialect, src: _Source) -> tuple[str, dict[str, Any]]:
    p = d.param
    clauses = [f"{src.tenant} = {p('tenant')}"]
    params: dict[str, Any] = {"tenant": query.tenant}
    if query.connection_id is not None:
        clauses.append(f"jc.connection_id = {p('cid')}")
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
            f"j.id IN (SELECT job_id FROM job_datasources WHERE config_name = {p('ds')})"
            f" AND {d.no_stored_entry(p('ds'))}"
        )
        params["ds"] = query.datasource
    if query.created_from is not None:
        clauses.append(f"{src.created} >= {p('created_from')}")
        params["created_from"] = d.ts(query.created_from)
    if query.created_before is not None:
        clauses.append(f"{src.created} < {p('created_before')}")
        params["created_before"] = d.ts(query.created_before)
    if query.after is not None:
        clauses.append(f"({src.created}, {src.id}) < ({p('after_at')}, {p('after_id')})")
        params["after_at"], params["after_id"] = d.ts(query.after[0]), query.after[1]
    return " AND ".join(clauses), params


def search_sql(query: JobSearchQuery, dialect: str) -> tuple[str, dict[str, Any]]:
    """The statement and parameters of one page on ``dialect`` (``postgres`` or ``sqlite``);
    public so that a test can ask either planner which index serves it."""
    d = _POSTGRES if dialect == "postgres" else _SQLITE
    src = _JOBS if query.connection_id is None else _BY_CONNECTION
    where, params = _where(query, d, src)
    params["limit"] = query.limit
    sql = (
        f"SELECT {_COLUMNS} FROM {src.tables} WHERE {where}"
        f" ORDER BY {src.created} DESC, {src.id} DESC LIMIT {d.param('limit')}"
    )
    return sql, params


@dataclass(frozen=True, slots=True)
class PostgresJobSearch:
    """:class:`~fetcher.services.ports.JobSearch` over the PostgreSQL store's pool:
    ``fetchall`` is the store's own (error mapping and outage recovery included)."""

    fetchall: Callable[[str, Any], Awaitable[Sequence[Any]]]

    async def search_jobs(self, query: JobSearchQuery) -> list[JobRecord]:
        sql, params = search_sql(query, "postgres")
        rows = await self.fetchall(sql, params)
        return [c.job_from_row(row, c.utc_ms) for row in rows]


@dataclass(frozen=True, slots=True)
class SqliteJobSearch:
    """:class:`~fetcher.services.ports.JobSearch` over the SQLite store's connection: ``run``
    is the store's own (its lock, its thread and its error mapping)."""

    run: Callable[[Callable[[sqlite3.Connection], list[Any]]], Awaitable[list[Any]]]

    async def search_jobs(self, query: JobSearchQuery) -> list[JobRecord]:
        sql, params = search_sql(query, "sqlite")
        rows = await self.run(lambda conn: conn.execute(sql, params).fetchall())
        return [c.job_from_row(row, c.parse_ts_text) for row in rows]
