"""Every statement of the metadata store, written once for both backends.

The text uses named ``:name`` parameters (the dialect renders them for its driver) and takes
from a :class:`~._dialect.Dialect` only what the backends spell differently. Every value is
a bound parameter; SQL text is assembled only from this module's constants, column names,
the dialect's fragments and generated placeholder names.
"""

# S608: see the module docstring; no value is ever formatted into SQL text.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from fetcher.adapters.store import _common as c
from fetcher.adapters.store._dialect import Dialect
from fetcher.adapters.store._program import Each, Row, Statement, Step
from fetcher.adapters.store.job_search import over_limit
from fetcher.services.records import (
    ConnectionQuery,
    ConnectionRecord,
    EventType,
    JobRecord,
    JobStatus,
    OutboxEvent,
)

#: A predicate that matches nothing, in either backend.
NEVER = "1 = 0"
#: The outbox columns after ``id`` and the feed sequence.
_OUTBOX_REST = (
    "ce_id, job_id, event_type, routing_key, body, headers_json, created_at, sent_at, tenant_id,"
    " traceparent, tracestate"
)
_ACTIVE = "status IN ('pending', 'processing')"
_LIVE_CONNECTION = "tenant_id = :tenant AND deleted_at IS NULL"

PING = Statement("SELECT 1 AS ok")
COUNT_UNSENT = Statement("SELECT count(*) AS n FROM outbox WHERE sent_at IS NULL")
#: §15.2 backlog gauges, across every tenant.
PENDING_BACKLOG = Statement(
    "SELECT count(*) AS n, min(created_at) AS oldest FROM jobs WHERE status = 'pending'"
)
UNSENT_BACKLOG = Statement(
    "SELECT count(*) AS n, min(created_at) AS oldest FROM outbox WHERE sent_at IS NULL"
)


def _marks(names: Collection[str]) -> str:
    return ", ".join(f":{name}" for name in names)


def _one_of(column: str, prefix: str, values: Sequence[Any], params: dict[str, Any]) -> str:
    """``column IN (…)`` with ``values`` bound as ``prefix0``, ``prefix1`` …; an empty set
    matches nothing."""
    if not values:
        return NEVER
    names = [f"{prefix}{i}" for i in range(len(values))]
    params.update(zip(names, values, strict=True))
    return f"{column} IN ({_marks(names)})"


def _outbox_columns(d: Dialect) -> str:
    return f"id, {d.feed_seq} AS feed_seq, {_OUTBOX_REST}"


# -- migrations (§1.5) ---------------------------------------------------------------------

APPLIED_VERSIONS = Statement("SELECT version FROM schema_migrations")
#: After the tenant migration: the jobs whose product is still to be filled, a batch at a time.
UNFILLED_JOBS = Statement(
    "SELECT id, metadata_json FROM jobs WHERE product IS NULL ORDER BY id LIMIT :limit",
    {"limit": c.BACKFILL_BATCH},
)
FILL_OUTBOX_PRODUCTS = Statement(
    "UPDATE outbox SET product = (SELECT product FROM jobs WHERE jobs.id = outbox.job_id)"
    " WHERE product IS NULL"
)


def ledger(d: Dialect) -> Statement:
    return Statement(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
        f" name TEXT NOT NULL, applied_at {d.ledger_applied_at})"
    )


def record_migration(d: Dialect, migration: c.Migration) -> Statement:
    return Statement(
        "INSERT INTO schema_migrations (version, name, applied_at)"
        f" VALUES (:version, :name, {d.now})",
        {"version": migration.version, "name": migration.name},
    )


def fill_job_products(rows: Sequence[Row]) -> Each:
    """The product (normalized source, §3.7) of jobs written before the tenant migration,
    computed by the same Python rule as at insert (SQL ``lower``/``trim`` differ from it)."""
    return Each("UPDATE jobs SET product = :product WHERE id = :id", c.job_products(rows))


# -- connections (§2.6) --------------------------------------------------------------------


def insert_connection(d: Dialect, record: ConnectionRecord) -> Statement:
    params = c.connection_params(record, d.ts)
    return Statement(
        f"INSERT INTO connections ({', '.join(params)}) VALUES ({_marks(params)})", params
    )


def connection_by(column: str, value: str, tenant: str) -> Statement:
    """The tenant's live connection whose ``column`` (``id`` or ``config_name``) is ``value``."""
    return Statement(
        f"SELECT {c.CONNECTION_COLUMNS} FROM connections"
        f" WHERE {column} = :value AND {_LIVE_CONNECTION}",
        {"value": value, "tenant": tenant},
    )


def connection_list(d: Dialect, query: ConnectionQuery, tenant: str) -> tuple[Statement, Statement]:
    """The total and the page of one connection-list query (§2.6.2), only the tenant's rows
    (§12.5); run both in one snapshot."""
    where, params = _list_where(d, query, tenant)
    direction = "ASC" if query.sort == "asc" else "DESC"
    page = (
        f"SELECT {_listed_connection_columns(d)} FROM connections WHERE {where}"
        f" ORDER BY created_at {direction}, id {direction} LIMIT :limit OFFSET :offset"
    )
    bounds = {"limit": query.limit, "offset": query.offset, "doc_max": query.max_document_bytes}
    return (
        Statement(f"SELECT count(*) AS n FROM connections WHERE {where}", params),
        Statement(page, {**params, **bounds}),
    )


#: TLS texts a list answer only tests for presence (§2.5 ``ssl`` shows the mode alone).
_PRESENCE_ONLY = ("ssl_ca", "ssl_cert", "ssl_key_encrypted")


def _listed_connection_columns(d: Dialect) -> str:
    """:data:`~._common.CONNECTION_COLUMNS` with documents over ``:doc_max`` bytes left in the
    database (issue 33): ``metadata_json`` becomes ``{}`` and ``cut_metadata`` is true; a TLS
    text becomes ``'-'`` (still set). A page of 100 connections is thus small whatever they
    hold."""
    columns = []
    for name in (n.strip() for n in c.CONNECTION_COLUMNS.split(",")):
        if name == "metadata_json":
            over = over_limit(d, name)
            columns += [
                f"CASE WHEN {over} THEN '{{}}' ELSE {name} END AS {name}",
                f"{over} AS cut_metadata",
            ]
        elif name in _PRESENCE_ONLY:
            columns.append(f"CASE WHEN {over_limit(d, name)} THEN '-' ELSE {name} END AS {name}")
        else:
            columns.append(name)
    return ", ".join(columns)


def _list_where(d: Dialect, query: ConnectionQuery, tenant: str) -> tuple[str, dict[str, Any]]:
    clauses = [_LIVE_CONNECTION]
    params: dict[str, Any] = {"tenant": tenant}
    if query.unassigned_only:
        clauses.append("product_name IS NULL")
    if query.product is not None:
        clauses.append("product_name = :product")
        params["product"] = query.product
    if query.products is not None:
        clauses.append(_one_of("product_name", "pr", sorted(query.products), params))
    if query.type is not None:
        # Stored types are ASCII; a non-ASCII filter matches nothing on every backend.
        clauses.append("lower(type) = :type" if query.type.isascii() else NEVER)
        params["type"] = query.type.lower()
    if query.created_from is not None:
        clauses.append("created_at >= :created_from")
        params["created_from"] = d.ts(query.created_from)
    if query.created_before is not None:
        clauses.append("created_at < :created_before")
        params["created_before"] = d.ts(query.created_before)
    for i, (key, value) in enumerate(query.metadata):
        clauses.append(d.metadata_match(f":mk{i}", f":mv{i}"))
        params[f"mk{i}"], params[f"mv{i}"] = key, value
    return " AND ".join(clauses), params


def update_connection(d: Dialect, record: ConnectionRecord) -> Statement:
    """Every column a write may change (§12.5: never the tenant); only a live row."""
    params = c.connection_params(record, d.ts)
    sets = ", ".join(f"{name} = :{name}" for name in params if name not in c.CONNECTION_FIXED)
    return Statement(
        f"UPDATE connections SET {sets}"
        " WHERE id = :id AND tenant_id = :tenant_id AND deleted_at IS NULL",
        params,
    )


def connections_under_other_keys(version: str, after_id: str, limit: int) -> Statement:
    """§14.3: rows of every tenant (deleted too) sealed under another key version."""
    return Statement(
        f"SELECT {c.CONNECTION_COLUMNS} FROM connections"
        " WHERE encryption_key_version <> :version AND id > :after ORDER BY id LIMIT :limit",
        {"version": version, "after": after_id, "limit": limit},
    )


def rekey_connection(
    record: ConnectionRecord, password: str | None, ssl_key: str | None, version: str
) -> Statement:
    """§14.3: a compare-and-set on the row's key version."""
    return Statement(
        "UPDATE connections SET password_encrypted = :password, ssl_key_encrypted = :ssl_key,"
        " encryption_key_version = :version"
        " WHERE id = :id AND tenant_id = :tenant AND encryption_key_version = :old",
        {
            "password": password,
            "ssl_key": ssl_key,
            "version": version,
            "id": record.id,
            "tenant": record.tenant,
            "old": record.encryption_key_version,
        },
    )


def soft_delete_connection(d: Dialect, connection_id: str, now: datetime, tenant: str) -> Statement:
    return Statement(
        "UPDATE connections SET deleted_at = :now, updated_at = :now"
        f" WHERE id = :id AND {_LIVE_CONNECTION}",
        {"id": connection_id, "tenant": tenant, "now": d.ts(now)},
    )


def assign_product(
    d: Dialect, connection_id: str, product_name: str, now: datetime, tenant: str
) -> Statement:
    """Only an unassigned connection takes a product (§2.6.4)."""
    return Statement(
        "UPDATE connections SET product_name = :product, updated_at = :now"
        f" WHERE id = :id AND {_LIVE_CONNECTION} AND product_name IS NULL",
        {"id": connection_id, "tenant": tenant, "product": product_name, "now": d.ts(now)},
    )


def has_active_jobs(config_name: str, tenant: str) -> Statement:
    return Statement(
        "SELECT EXISTS (SELECT 1 FROM job_datasources d JOIN jobs j ON j.id = d.job_id"
        f" WHERE d.config_name = :name AND j.tenant_id = :tenant AND j.{_ACTIVE}) AS found",
        {"name": config_name, "tenant": tenant},
    )


# -- jobs (§3.6, §3.8, §4) -----------------------------------------------------------------


def dedup_match(d: Dialect, request_hash: str, completed_since: datetime, tenant: str) -> Statement:
    """§3.8: the newest active job with the hash, or one completed within the window."""
    return Statement(
        f"SELECT {c.JOB_COLUMNS} FROM jobs WHERE tenant_id = :tenant AND request_hash = :hash"
        f" AND ({_ACTIVE} OR (status = 'completed' AND created_at >= :since))"
        " ORDER BY created_at DESC, id DESC LIMIT 1",
        {"tenant": tenant, "hash": request_hash, "since": d.ts(completed_since)},
    )


def insert_job(d: Dialect, record: JobRecord) -> tuple[Step, ...]:
    """The job row and its datasource names (§2.6.5 step 6), all or nothing.

    Where the dialect chains inserts this is one statement, so one round trip (§3.6 step 15
    runs on every new job): a data-modifying CTE is atomic, and the names' foreign key sees
    the job row, checked at the end of the statement (an explicit transaction took five
    round trips on PostgreSQL). Elsewhere the two steps run in one write transaction.
    """
    params = c.job_params(record, d.ts)
    names = list(dict.fromkeys(c.datasource_names(record.mapped_fields_json)))
    insert = f"INSERT INTO jobs ({', '.join(params)}) VALUES ({_marks(params)})"
    if d.chained_insert:
        return (
            Statement(
                f"WITH job AS ({insert} RETURNING id)"
                " INSERT INTO job_datasources (job_id, config_name)"
                " SELECT job.id, name FROM job, unnest(CAST(:datasource_names AS text[])) AS name",
                {**params, "datasource_names": names},
            ),
        )
    rows = [{"job_id": record.id, "config_name": name} for name in names]
    return (
        Statement(insert, params),
        Each(
            "INSERT INTO job_datasources (job_id, config_name) VALUES (:job_id, :config_name)", rows
        ),
    )


def job_by_id(job_id: str, tenant: str) -> Statement:
    return Statement(
        f"SELECT {c.JOB_COLUMNS} FROM jobs WHERE id = :id AND tenant_id = :tenant",
        {"id": job_id, "tenant": tenant},
    )


def claim_job(d: Dialect, job_id: str, now: datetime) -> Statement:
    """§4: the atomic claim, a compare-and-set from ``pending``."""
    return Statement(
        "UPDATE jobs SET status = 'processing', started_at = :now, updated_at = :now,"
        f" dedup_active = {d.true} WHERE id = :id AND status = 'pending'",
        {"id": job_id, "now": d.ts(now)},
    )


def complete_job(
    d: Dialect,
    job_id: str,
    result: tuple[str, str, str | None, str | None],
    completed_at: datetime,
) -> Statement:
    """A compare-and-set from ``processing``; frees the request hash (§3.8). ``result`` is
    (path, hmac, summary JSON, key version): recorded with the status (§14.1)."""
    path, hmac, summary, version = result
    return Statement(
        "UPDATE jobs SET status = 'completed', result_path = :path, result_hmac = :hmac,"
        " result_summary_json = :summary, result_key_version = :key_version,"
        f" completed_at = :at, updated_at = :at, dedup_active = {d.false}"
        " WHERE id = :id AND status = 'processing'",
        {
            "id": job_id,
            "path": path,
            "hmac": hmac,
            "summary": summary,
            "key_version": version,
            "at": d.ts(completed_at),
        },
    )


def fail_job(
    d: Dialect,
    job_id: str,
    from_statuses: Sequence[JobStatus],
    error: str,
    completed_at: datetime,
) -> Statement:
    """A compare-and-set from the given active statuses (§4.1); frees the request hash."""
    params: dict[str, Any] = {"id": job_id, "error": error, "at": d.ts(completed_at)}
    allowed = _one_of("status", "s", c.failable_statuses(from_statuses), params)
    return Statement(
        "UPDATE jobs SET status = 'failed', error = :error, completed_at = :at,"
        f" updated_at = :at, dedup_active = {d.false} WHERE id = :id AND {allowed}",
        params,
    )


def cancel_job(d: Dialect, job_id: str, canceled_at: datetime) -> Statement:
    """§14.4: a compare-and-set from ``pending`` or ``processing`` to ``canceled``; frees the
    request hash. Racing :func:`complete_job`/:func:`fail_job`, exactly one matches."""
    return Statement(
        "UPDATE jobs SET status = 'canceled', completed_at = :at, updated_at = :at,"
        f" dedup_active = {d.false} WHERE id = :id AND {_ACTIVE}",
        {"id": job_id, "at": d.ts(canceled_at)},
    )


def job_status(job_id: str) -> Statement:
    """The status of one job of any tenant (the Worker's cancellation poll, §14.4)."""
    return Statement("SELECT status FROM jobs WHERE id = :id", {"id": job_id})


def insert_event(d: Dialect, event: OutboxEvent) -> Statement:
    """The outbox row of ``event``, with its job's tenant and product (§12.4, §12.5)."""
    return Statement(
        "INSERT INTO outbox (ce_id, job_id, event_type, routing_key, body, headers_json,"
        " created_at, traceparent, tracestate, tenant_id, product) SELECT :ce_id, :job_id,"
        " :event_type, :routing_key, :body, :headers_json, :created_at, :traceparent,"
        " :tracestate, tenant_id, product FROM jobs WHERE id = :job_id",
        c.event_params(event, d.ts),
    )


def reap_candidates(
    d: Dialect, pending_before: datetime, processing_before: datetime, limit: int
) -> Statement:
    return Statement(
        f"SELECT {c.JOB_COLUMNS} FROM jobs"
        " WHERE (status = 'pending' AND created_at < :pending)"
        " OR (status = 'processing' AND started_at < :processing)"
        " ORDER BY created_at, id LIMIT :limit",
        {"pending": d.ts(pending_before), "processing": d.ts(processing_before), "limit": limit},
    )


def jobs_with_status(status: JobStatus) -> Statement:
    return Statement(
        f"SELECT {c.JOB_COLUMNS} FROM jobs WHERE status = :status ORDER BY created_at, id",
        {"status": status},
    )


# -- outbox and feed (§8.6, §2.12) ---------------------------------------------------------


def claim_unsent(d: Dialect, created_before: datetime, limit: int) -> Statement:
    """Unsent rows oldest first; with the dialect's lock, rows another claimer holds are
    skipped."""
    return Statement(
        f"SELECT {_outbox_columns(d)} FROM outbox WHERE sent_at IS NULL AND created_at < :before"
        f" ORDER BY created_at, id LIMIT :limit{d.claim_lock}",
        {"before": d.ts(created_before), "limit": limit},
    )


def mark_sent(d: Dialect, ce_ids: Sequence[str], at: datetime) -> Each:
    stamp = d.ts(at)
    return Each(
        "UPDATE outbox SET sent_at = :at WHERE ce_id = :ce_id",
        [{"at": stamp, "ce_id": ce_id} for ce_id in ce_ids],
    )


def feed(
    d: Dialect,
    *,
    after: int,
    limit: int,
    event_type: EventType | None,
    tenant: str,
    products: Collection[str] | None,
) -> Statement:
    """A feed read (§2.12): the tenant's rows (§12.5) after the cursor, of one type, and for
    a product-restricted token only its products' rows (§12.4; an empty set matches
    nothing). The outbox indexes ``(tenant_id, seq)`` and ``(tenant_id, product, seq)``
    serve it."""
    clauses = ["tenant_id = :tenant", f"{d.feed_seq} > :after"]
    params: dict[str, Any] = {"tenant": tenant, "after": after, "limit": limit}
    if event_type is not None:
        clauses.append("event_type = :type")
        params["type"] = event_type
    if products is not None:
        clauses.append(_one_of("product", "p", sorted(set(products)), params))
    return Statement(
        f"SELECT {_outbox_columns(d)} FROM outbox WHERE {' AND '.join(clauses)}"
        f" ORDER BY {d.feed_seq} LIMIT :limit",
        params,
    )
