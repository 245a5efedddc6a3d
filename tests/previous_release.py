"""A metadata store as the PREVIOUS release left it (docs/upgrades.md, contract §15.4).

The previous release shipped the migrations in :data:`PREVIOUS_RELEASE_MIGRATIONS`; every
migration shipped beyond them is what this release adds, and an upgrade test applies exactly
those (so a future ``0005_*.sql`` is exercised without touching the tests; when a release is
cut, its migrations join the list). The rows are written by plain SQL inserts in the shape that
schema has, the way that release's code wrote them, never through this release's store code:
jobs in every status, connections of several types (stored, soft-deleted; passwords encrypted
under the §6.6 master key, key version ``1``), outbox rows published and not yet published.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fetcher.adapters.store._common import Migration, load_migrations
from fetcher.crypto import KeySet, encrypt_credential, parse_master_key
from fetcher.services.jobs.work_messages import signed_work_headers

#: The migration versions the previous release shipped. Add a release's versions here when
#: it is cut; never remove one.
PREVIOUS_RELEASE_MIGRATIONS: tuple[int, ...] = (1, 2, 3, 4)

PRODUCT = "payments"
CE_SOURCE = "//lerian.fetcher/worker"
#: The error text the previous release stored for :attr:`OldRows.failed`.
OLD_FAILURE = "extraction failed: upstream said no"
MAPPED_FIELDS = '{"pg_src":{"public.accounts":["id","email"]}}'


def previous_migrations(backend: str) -> list[Migration]:
    return [m for m in load_migrations(backend) if m.version in PREVIOUS_RELEASE_MIGRATIONS]


def added_migrations(backend: str) -> list[str]:
    """The names of the migrations this release adds (applied by the upgrade)."""
    return [
        m.name for m in load_migrations(backend) if m.version not in PREVIOUS_RELEASE_MIGRATIONS
    ]


def _id() -> str:
    return str(uuid.uuid4())


def _ts(moment: datetime) -> str:
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


@dataclass(frozen=True)
class OldRows:
    """The IDs of what the previous release wrote."""

    pg_connection: str  #: POSTGRESQL ``pg_src`` to the source database, password encrypted
    mysql_connection: str  #: MYSQL ``mysql_old``, password encrypted
    mongo_connection: str  #: MONGODB ``mongo_old``, no credentials
    deleted_connection: str  #: POSTGRESQL ``pg_retired``, soft-deleted
    pending: str  #: pending long ago, its work message lost: the reaper's (§4.4)
    queued: str  #: pending, its work message still in the queue (:func:`work_message`)
    processing: str  #: processing, its Worker gone
    completed: str  #: completed; its job.completed event published (sent_at set)
    failed: str  #: failed; its job.failed event NOT yet published (sent_at NULL)
    password: str  #: the plaintext of every stored password
    queued_at: str  #: the ``created_at`` of :attr:`queued`

    @property
    def live_connections(self) -> set[str]:
        return {self.pg_connection, self.mysql_connection, self.mongo_connection}


Execute = Callable[[str, Sequence[object]], object]


def write_previous_release(
    execute: Execute,
    backend: str,
    *,
    master_key: str,
    source_host: str,
    source_port: int,
    source_database: str,
    pending_age: timedelta,
    processing_age: timedelta,
    head: bool = False,
) -> OldRows:
    """Apply the previous release's migrations with its ledger and write its rows, through
    ``execute(sql, params)`` (``?`` marks; the caller adapts them to its driver). ``head``:
    apply every shipped migration instead, and write the same rows: the previous release's
    processes running on this release's schema (a rollback, docs/upgrades.md)."""
    now = datetime.now(UTC)
    schema = load_migrations(backend) if head else previous_migrations(backend)
    for migration in schema:
        for statement in _script(migration.sql, backend):
            execute(statement, ())
    applied_at = "TIMESTAMPTZ NOT NULL DEFAULT now()" if backend == "postgres" else "TEXT NOT NULL"
    execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        f" applied_at {applied_at})",
        (),
    )
    for migration in schema:
        execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, _ts(now - timedelta(days=30))),
        )
    password = f"old-release-{uuid.uuid4().hex[:8]}"
    key = KeySet.from_master(parse_master_key(master_key)).credentials
    rows = OldRows(
        pg_connection=_id(),
        mysql_connection=_id(),
        mongo_connection=_id(),
        deleted_connection=_id(),
        pending=_id(),
        queued=_id(),
        processing=_id(),
        completed=_id(),
        failed=_id(),
        password=password,
        queued_at=_ts(now - timedelta(seconds=10)),
    )
    made = _ts(now - timedelta(days=3))
    connections = (
        (rows.pg_connection, "pg_src", "POSTGRESQL", source_host, source_port, source_database,
         "postgres", password, '{"team":"ledger"}', None),
        (rows.mysql_connection, "mysql_old", "MYSQL", "127.0.0.1", 3306, "shop", "reader",
         password, "{}", None),
        (rows.mongo_connection, "mongo_old", "MONGODB", "127.0.0.1", 27018, "events", None,
         None, '{"tier":3}', None),
        (rows.deleted_connection, "pg_retired", "POSTGRESQL", "127.0.0.1", 5432, "old", "postgres",
         password, "{}", _ts(now - timedelta(days=1))),
    )  # fmt: skip
    for cid, name, kind, host, port, database, user, secret, metadata, deleted in connections:
        encrypted = None if secret is None else encrypt_credential(key, secret, cid)
        execute(
            "INSERT INTO connections (id, product_name, config_name, type, host, port,"
            " database_name, user_name, password_encrypted, encryption_key_version,"
            " metadata_json, created_at, updated_at, deleted_at, tenant_id, created_by)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '1', ?, ?, ?, ?, '', NULL)",
            (cid, PRODUCT, name, kind, host, port, database, user, encrypted, metadata,
             made, made, deleted),
        )  # fmt: skip
    mapped = MAPPED_FIELDS
    links = json.dumps({"pg_src": rows.pg_connection})
    jobs = (  # id, status, active, created, started, completed, result, error
        (rows.pending, "pending", True, now - pending_age, None, None, None, None),
        (rows.queued, "pending", True, now - timedelta(seconds=10), None, None, None, None),
        (rows.processing, "processing", True, now - processing_age - timedelta(seconds=1),
         now - processing_age, None, None, None),
        (rows.completed, "completed", False, now - timedelta(hours=2),
         now - timedelta(hours=2), now - timedelta(hours=2), f"external-data/{rows.completed}.json",
         None),
        (rows.failed, "failed", False, now - timedelta(hours=1), now - timedelta(hours=1),
         now - timedelta(hours=1), None, OLD_FAILURE),
    )  # fmt: skip
    for n, (jid, status, active, created, started, completed, result, error) in enumerate(jobs):
        metadata = json.dumps({"source": PRODUCT, "correlationId": f"old-{n}"})
        execute(
            "INSERT INTO jobs (id, status, request_hash, dedup_active, mapped_fields_json,"
            " metadata_json, connection_ids_json, result_path, result_hmac, error, request_id,"
            " created_at, started_at, completed_at, updated_at, tenant_id, created_by, product)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', NULL, ?)",
            (jid, status, uuid.uuid4().hex * 2, active, mapped, metadata, links, result,
             None if result is None else "ab" * 32, error, f"req-old-{n}", _ts(created),
             None if started is None else _ts(started),
             None if completed is None else _ts(completed),
             _ts(completed or started or created), PRODUCT),
        )  # fmt: skip
        execute("INSERT INTO job_datasources (job_id, config_name) VALUES (?, 'pg_src')", (jid,))
    for jid, kind, sent in ((rows.completed, "completed", True), (rows.failed, "failed", False)):
        _outbox(execute, backend, jid, kind, sent=sent, at=now - timedelta(minutes=30))
    return rows


def work_message(old: OldRows, *, master_key: str, work_queue: str) -> tuple[bytes, dict[str, Any]]:
    """The §7.2 work message the previous release's Manager published for :attr:`OldRows.queued`
    (body and AMQP headers, signed per §7.3): it waits in the durable queue across the
    upgrade."""
    body = json.dumps(
        {
            "createdAt": old.queued_at,
            "jobId": old.queued,
            "mappedFields": json.loads(MAPPED_FIELDS),
            "metadata": {"source": PRODUCT, "correlationId": "old-1"},
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    internal = KeySet.from_master(parse_master_key(master_key)).internal_hmac
    headers = signed_work_headers(
        internal,
        body,
        routing_key=work_queue,
        base={"jobId": old.queued, "x-request-id": "req-old-1", "x-retry-count": 0},
    )
    return body, dict(headers)


def _outbox(
    execute: Execute, backend: str, job_id: str, kind: str, *, sent: bool, at: datetime
) -> None:
    """One outbox row as the previous release's Worker stored it: the §8.2/§8.3 body and the
    eleven §8.4 headers (signed at publish time, not stored)."""
    metadata: dict[str, object] = {"source": PRODUCT, "correlationId": "old"}
    if kind == "failed":
        metadata["error"] = {"message": OLD_FAILURE}
        body: dict[str, object] = {"job_id": job_id, "status": "failed", "metadata": metadata}
    else:
        digest = "ab" * 32
        body = {
            "job_id": job_id,
            "status": "completed",
            "metadata": metadata,
            "result": {
                "path": f"external-data/{job_id}.json",
                "size_bytes": 2,
                "row_count": 0,
                "format": "json",
                "hmac": digest,
                "integrity": {"algorithm": "HMAC-SHA256", "signature": digest},
                "protection": {"encrypted": True, "algorithm": "AES-256-GCM"},
            },
            "execution_time_ms": 5,
            "completed_at": _ts(at),
        }
    headers = {
        "ce-specversion": "1.0",
        "ce-id": f"fetcher.job.{kind}.{job_id}",
        "ce-source": CE_SOURCE,
        "ce-type": f"studio.lerian.job.{kind}",
        "ce-time": _ts(at),
        "ce-subject": job_id,
        "ce-resourcetype": "job",
        "ce-eventtype": kind,
        "ce-schemaversion": "2.0.0",
        "ce-datacontenttype": "application/json",
        "ce-tenantid": "single-tenant",
    }
    numbered = backend == "postgres" and sent
    execute(
        "INSERT INTO outbox (ce_id, job_id, event_type, routing_key, body, headers_json,"
        f" created_at, sent_at, tenant_id, product{', feed_seq' if numbered else ''})"
        f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', ?{', 1' if numbered else ''})",
        (headers["ce-id"], job_id, kind, f"job.{kind}",
         json.dumps(body, separators=(",", ":")).encode(), json.dumps(headers), _ts(at),
         _ts(at + timedelta(seconds=1)) if sent else None, PRODUCT),
    )  # fmt: skip


def _script(sql: str, backend: str) -> list[str]:
    """A migration script as statements for ``execute``: PostgreSQL takes it whole; SQLite's
    driver runs one statement at a time (triggers contain ``;``)."""
    if backend == "postgres":
        return [sql]
    statements, current = [], ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current)
            current = ""
    return [s for s in statements if s.strip() and not _only_comments(s)]


def _only_comments(statement: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in statement.splitlines())


def write_postgres(conninfo: str, **kwargs: object) -> OldRows:
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:

        def execute(sql: str, params: Sequence[object]) -> object:
            text = sql if not params else sql.replace("?", "%s")
            return conn.execute(text.encode(), tuple(params) or None)

        return write_previous_release(execute, "postgres", **kwargs)  # type: ignore[arg-type]


def write_sqlite(path: Path, **kwargs: object) -> OldRows:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = ON")

        def execute(sql: str, params: Sequence[object]) -> object:
            return conn.execute(sql, tuple(params))

        return write_previous_release(execute, "sqlite", **kwargs)  # type: ignore[arg-type]
    finally:
        conn.close()
        path.chmod(0o600)
