"""The metadata store ports: what services need from PostgreSQL or SQLite (contract §2.6, §4, §8.6).

The store is seen through role Protocols, each service depending only on the roles it uses:
:class:`StoreLifecycle` (migrations, ping, the embedded lock), :class:`ConnectionLookup`
(connections by ID or name) and :class:`ConnectionStore` (their writes and lists),
:class:`JobStore` (jobs and their transitions), :class:`FeedStore` (the §2.12 event feed) and
:class:`Outbox` (the relay's side of the outbox). One adapter class implements every role
(structural typing); only the composition root needs all of them at once
(``fetcher.bootstrap.MetadataStore``). Services never import an adapter; bootstrap hands them
one. Every implementation MUST behave identically (one behavioural test suite runs against all
of them).

Errors crossing this port are drawn here, closed:

* :class:`ConflictError`: a non-deleted connection already uses the ``configName`` (→ 409
  FET-1002).
* :class:`ActiveDuplicateError`: an active job already has the ``request_hash`` (§3.8 guard).
* :class:`StoreUnavailableError`: the store cannot be reached or failed (→ 503 FET-0003).

Implementations MUST translate driver exceptions into these at one edge, and MUST NOT put the
DSN, a password or any credential in an exception message or a log line.

Tenancy (§12.5): every connection, job and outbox row belongs to one tenant (``""`` in
single-tenant mode). Every read a caller makes on behalf of a request takes a keyword-only
``tenant`` with no default, so no call can forget it, and sees only that tenant's rows; a write
by ID matches only a row of that tenant (another tenant's ID is "absent"). Inserts take the
tenant from the record. The job transitions (claim, complete, fail) and the relay's and
reaper's methods act by job or event ID on rows their caller already loaded within a tenant,
or on every tenant (the reaper, the relay); an outbox row takes its tenant and product from its
job. ``feed_seq`` stays global.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from fetcher.services.records import (
    ConnectionQuery,
    ConnectionRecord,
    EventType,
    JobRecord,
    JobStatus,
    OutboxEvent,
    OutboxRow,
)

__all__ = [
    "Backlog",
    "BacklogReader",
    "ConnectionLookup",
    "ConnectionStore",
    "FeedStore",
    "JobStore",
    "Outbox",
    "StoreLifecycle",
    "MigrationStatus",
    "StoreError",
    "ConflictError",
    "ActiveDuplicateError",
    "StoreUnavailableError",
    "OutboxBatch",
]


class StoreError(Exception):
    """Base of every metadata store error."""


class ConflictError(StoreError):
    """A non-deleted connection already uses this ``configName`` (§2.6.1, §2.6.5)."""


class ActiveDuplicateError(StoreError):
    """A ``pending``/``processing`` job already has this ``request_hash`` (§3.8 guard)."""


class StoreUnavailableError(StoreError):
    """The store is unreachable or failed; the Manager answers 503 FET-0003."""


class OutboxBatch(Protocol):
    """Unsent outbox rows claimed by one repairer (§8.6), oldest first."""

    @property
    def rows(self) -> Sequence[OutboxRow]:
        """The claimed rows, ordered by ``created_at`` then ``id``."""
        ...

    async def mark_sent(self, ce_ids: Sequence[str], at: datetime) -> None:
        """Set ``sent_at`` of the given claimed rows; durable when the claim ends."""
        ...


# Every role: times passed in MUST be timezone-aware; implementations store them with
# millisecond precision and return them as UTC. Nothing here reads the clock.


@dataclass(frozen=True, slots=True)
class MigrationStatus:
    """Where a store's schema stands against the migrations this release ships (§15.4).

    ``pending``: the names of shipped migrations not yet applied, in order. ``unknown``: the
    versions the store's ledger records that this release does not ship (a newer release
    applied them: this process runs after a rollback, §15.4). ``version``: the highest shipped
    version applied (0 for an empty store).
    """

    version: int
    pending: tuple[str, ...]
    unknown: tuple[int, ...]


class StoreLifecycle(Protocol):
    """Opening the store for a process: migrations, the readiness ping, the embedded lock."""

    async def migrate(self) -> list[str]:
        """Apply pending schema migrations (§1.5, §15.4); the names of those applied now.

        MUST be idempotent and serialized across processes (PostgreSQL: ``pg_advisory_lock``;
        SQLite: ``BEGIN EXCLUSIVE``), recording each applied version. A Manager start and
        ``fetcher migrate`` run this same method, so they cannot race.
        """
        ...

    async def migration_status(self) -> MigrationStatus:
        """The schema's state without changing anything (``fetcher migrate --check``): reads
        the ledger only, takes no lock, creates no table."""
        ...

    async def ping(self) -> None:
        """Round-trip to the store; raise :class:`StoreUnavailableError` when it fails."""
        ...

    async def acquire_process_lock(self) -> bool:
        """Take the embedded single-process lock (§4.4); ``False`` when another holds it.

        PostgreSQL: a session-level ``pg_try_advisory_lock(<constant>)`` held until
        :meth:`close`. SQLite: always ``True`` (the file has one embedded owner).
        """
        ...

    async def close(self) -> None:
        """Release every connection. Safe to call twice."""
        ...


class ConnectionLookup(Protocol):
    """A tenant's non-deleted connections by ID or ``configName`` (§2.5, §2.6, §12.5)."""

    async def get_connection(self, connection_id: str, *, tenant: str) -> ConnectionRecord | None:
        """The tenant's non-deleted connection with this ID, else ``None``."""
        ...

    async def get_connection_by_name(
        self, config_name: str, *, tenant: str
    ) -> ConnectionRecord | None:
        """The tenant's non-deleted connection with this ``config_name`` (case-sensitive), else
        ``None``."""
        ...


class ConnectionStore(ConnectionLookup, Protocol):
    """The connection routes' writes and lists (§2.6), besides the lookups."""

    async def insert_connection(self, record: ConnectionRecord) -> None:
        """Store a new connection.

        MUST raise :class:`ConflictError` when a non-deleted connection of the same tenant has
        the same ``config_name`` (§12.5: unique per tenant), enforced by the store itself (a
        partial unique index) so that of two concurrent inserts exactly one succeeds.
        """
        ...

    async def list_connections(
        self, query: ConnectionQuery, *, tenant: str
    ) -> tuple[list[ConnectionRecord], int]:
        """One slice of the tenant's non-deleted connections matching ``query``, and their total
        count (of the tenant's rows only, §12.5).

        Sorted by ``created_at`` then ``id``, both in ``query.sort`` direction (§2.6.2).
        ``type`` matches case-insensitively.
        """
        ...

    async def update_connection(self, record: ConnectionRecord) -> bool:
        """Replace every mutable field of the non-deleted connection ``record.id`` of the tenant
        ``record.tenant``.

        ``id``, ``product_name``, ``tenant``, ``created_by``, ``created_at`` and ``deleted_at``
        are not changed. Returns ``False`` when no such connection exists in that tenant.
        Raises :class:`ConflictError` as :meth:`insert_connection` does.
        """
        ...

    async def soft_delete_connection(
        self, connection_id: str, now: datetime, *, tenant: str
    ) -> bool:
        """Set ``deleted_at = updated_at = now`` (§2.6.6); ``False`` when absent, deleted or
        another tenant's.

        The ``config_name`` becomes free for reuse.
        """
        ...

    async def assign_product(
        self, connection_id: str, product_name: str, now: datetime, *, tenant: str
    ) -> bool:
        """Atomically set ``product_name`` and ``updated_at`` only where no product is set.

        ``False`` when the connection is absent, deleted, another tenant's or already assigned
        (§2.6.10).
        """
        ...

    async def has_active_jobs(self, config_name: str, *, tenant: str) -> bool:
        """Whether a ``pending``/``processing`` job of the tenant has this ``mappedFields`` key
        (§2.6.5)."""
        ...


class JobStore(Protocol):
    """Jobs: the guarded insert and deduplication (§3.8), the transitions of §4 and the
    reaper's and embedded recovery's lists (§4.4)."""

    async def find_dedup_match(
        self, request_hash: str, completed_since: datetime, *, tenant: str
    ) -> JobRecord | None:
        """The tenant's newest job (by ``created_at``, then ``id``) with this hash that is §3.8
        eligible (§12.5: deduplication is per tenant).

        Eligible: ``pending``/``processing`` of any age, or ``completed`` with
        ``created_at >= completed_since``. A ``failed`` job never matches.
        """
        ...

    async def insert_job(self, record: JobRecord) -> None:
        """Store a new job of ``record.tenant`` with its documents verbatim, the datasource names
        it maps and its product (the normalized source, §3.7).

        MUST raise :class:`ActiveDuplicateError` when ``record.dedup_active`` and another
        active job of the same tenant has the same ``request_hash`` (a unique index over
        ``(tenant, request_hash)`` where ``dedup_active``), so that of N concurrent inserts
        exactly one succeeds.
        """
        ...

    async def get_job(self, job_id: str, *, tenant: str) -> JobRecord | None:
        """The tenant's job with this ID, else ``None``."""
        ...

    async def claim_job(self, job_id: str, now: datetime) -> bool:
        """CAS ``pending → processing``, setting ``started_at = updated_at = now`` (§4.2).

        ``True`` for exactly one caller; ``False`` when the job is not ``pending``.
        """
        ...

    async def complete_job(
        self,
        job_id: str,
        *,
        result_path: str,
        result_hmac: str,
        completed_at: datetime,
        event: OutboxEvent,
        result_summary_json: str | None = None,
        result_key_version: str | None = None,
    ) -> bool:
        """CAS ``processing → completed`` and insert ``event`` in ONE transaction (§4.3 step 6).

        Sets ``result_path``, ``result_hmac``, the result summary and key version (§14.1,
        §14.3: in the same statement as the status), ``completed_at = updated_at`` and clears
        ``dedup_active``. When the CAS matches nothing it returns ``False`` and writes no
        outbox row. After commit the store assigns pending ``feed_seq`` values (§2.12).
        """
        ...

    async def fail_job(
        self,
        job_id: str,
        *,
        from_statuses: Sequence[JobStatus],
        error: str,
        completed_at: datetime,
        event: OutboxEvent,
    ) -> bool:
        """CAS ``<one of from_statuses> → failed`` and insert ``event`` in ONE transaction.

        ``from_statuses`` may hold only ``pending`` and ``processing`` (§4.1). Sets ``error``,
        ``completed_at = updated_at`` and clears ``dedup_active``. Otherwise as
        :meth:`complete_job`.
        """
        ...

    async def cancel_job(self, job_id: str, *, canceled_at: datetime, event: OutboxEvent) -> bool:
        """CAS ``pending|processing → canceled`` and insert ``event`` in ONE transaction (§14.4).

        Sets ``completed_at = updated_at = canceled_at`` and clears ``dedup_active``. Racing
        :meth:`complete_job` or :meth:`fail_job`, exactly one CAS matches, so a job ends in one
        terminal state with one event. Otherwise as :meth:`complete_job`.
        """
        ...

    async def job_status(self, job_id: str) -> JobStatus | None:
        """The job's status whatever its tenant, else ``None`` (the Worker's poll, §14.4)."""
        ...

    async def reap_candidates(
        self,
        *,
        pending_created_before: datetime,
        processing_started_before: datetime,
        limit: int,
    ) -> list[JobRecord]:
        """Jobs the §4.4 reaper may fail: ``pending`` with ``created_at`` before the first
        bound, and ``processing`` with ``started_at`` before the second, oldest first.

        The reaper passes the shortest possible processing threshold, checks each processing
        job against its own ``timeoutSeconds`` (``limits_json``), and fails it with
        :meth:`fail_job`, whose CAS makes a race with the Worker harmless.
        """
        ...

    async def jobs_with_status(self, status: JobStatus) -> list[JobRecord]:
        """Every job in ``status``, oldest first (embedded startup recovery, §4.4)."""
        ...


class FeedStore(Protocol):
    """The §2.12 event feed: committed outbox rows by ``feed_seq``."""

    async def read_feed(
        self,
        *,
        after: int,
        limit: int,
        event_type: EventType | None = None,
        tenant: str,
        products: Collection[str] | None,
    ) -> list[OutboxRow]:
        """The tenant's rows with a ``feed_seq`` greater than ``after``, ascending by
        ``feed_seq``; with ``products`` (a product-restricted token, §12.4) only the rows of
        jobs whose normalized source is one of them. An index serves both filters."""
        ...


class Outbox(Protocol):
    """The relay's side of the outbox (§8.6): claim, acknowledge, number and count rows."""

    def claim_unsent(
        self, *, created_before: datetime, limit: int
    ) -> AbstractAsyncContextManager[OutboxBatch]:
        """Claim up to ``limit`` unsent rows created before ``created_before``, oldest first.

        While the context is open no other claimer gets these rows (PostgreSQL: ``FOR UPDATE
        SKIP LOCKED`` in a transaction held by the context). Marks made through the batch
        are committed when the context exits, also when its body raised.
        """
        ...

    async def mark_sent(self, ce_ids: Sequence[str], at: datetime) -> None:
        """Set ``sent_at = at`` on the rows with these ``ce_id`` values (the relay's ack)."""
        ...

    async def assign_feed_seq(self) -> int:
        """Number committed rows lacking ``feed_seq`` in ``id`` order, gap-free (§2.12).

        PostgreSQL holds ``pg_advisory_xact_lock(<constant>)`` for it; SQLite uses the rowid
        and assigns nothing. Returns how many rows were numbered.
        """
        ...

    async def count_unsent(self) -> int:
        """How many outbox rows have no ``sent_at``."""
        ...


# -- job search (GET /v1/fetcher, issue 21) ----------------------------------------------------
# Appended as one self-contained section (its own import) so that it merges cleanly with the
# restructuring of the rest of this file.

from dataclasses import dataclass  # noqa: E402


@dataclass(frozen=True, slots=True)
class JobSearchQuery:
    """One page of a tenant's jobs, newest first: keyset pagination on ``(created_at, id)``
    descending, so page 10,000 costs what page 1 does.

    Every filter is ANDed; ``None`` (or empty ``statuses``) means "no such filter".
    ``products`` is the set the caller may see (the ``X-Product-Name`` header and a restricted
    token's products, intersected by the service); an empty set matches nothing.
    ``connection_id`` matches a job that resolved a stored connection to that ID
    (``connection_ids``); ``datasource`` matches a job that names that datasource without a
    stored connection for it (an internal datasource, §9.4). ``after`` is the last row of the
    previous page: only rows strictly before it in the order are returned.
    ``max_document_bytes``: the largest ``mappedFields``/``filters``/``metadata`` text (UTF-8
    bytes) a listed row carries whole (:class:`ListedJob`).
    """

    tenant: str
    limit: int
    statuses: frozenset[JobStatus] = frozenset()
    products: frozenset[str] | None = None
    connection_id: str | None = None
    datasource: str | None = None
    created_from: datetime | None = None
    created_before: datetime | None = None
    after: tuple[datetime, str] | None = None
    max_document_bytes: int = 4096


@dataclass(frozen=True, slots=True)
class ListedJob:
    """A job as a list page carries it: ``cut`` names the documents (``mappedFields``,
    ``filters``, ``metadata``) whose stored text was over ``max_document_bytes`` and that the
    store left in the database. In ``job`` a cut ``mapped_fields_json`` is ``{}``, a cut
    ``filters_json`` ``None`` and a cut ``metadata_json`` ``{"source": <its source>}``."""

    job: JobRecord
    cut: tuple[Literal["mappedFields", "filters", "metadata"], ...] = ()


class JobSearch(Protocol):
    """The job list queries (``fetcher.adapters.store.job_search``), over the same store.

    Separate from :class:`MetadataStore` so that the list can grow without touching every
    store method. Errors as :class:`MetadataStore` (:class:`StoreUnavailableError`).
    """

    async def search_jobs(self, query: JobSearchQuery) -> list[ListedJob]:
        """Up to ``query.limit`` of the tenant's matching jobs, by ``created_at`` then ``id``,
        both descending. An index serves every filter combination's order. A document over
        ``query.max_document_bytes`` MUST be cut in the database, never read whole: a page's
        memory is bounded by its rows' small columns, whatever the jobs' documents hold."""
        ...


class CredentialRekeying(Protocol):
    """Re-encrypting stored credentials after a rotation of ``APP_ENC_KEY`` (§14.3,
    ``fetcher rotate-credentials``). Errors as :class:`MetadataStore`."""

    async def connections_under_other_keys(
        self, version: str, *, after_id: str, limit: int
    ) -> list[ConnectionRecord]:
        """Up to ``limit`` connections of every tenant, deleted ones included, whose
        ``encryption_key_version`` is not ``version``, by ID above ``after_id``."""
        ...

    async def rekey_connection(
        self,
        record: ConnectionRecord,
        *,
        password_encrypted: str | None,
        ssl_key_encrypted: str | None,
        version: str,
    ) -> bool:
        """Replace the row's two ciphertexts and its key version, only while the row still has
        ``record``'s version (a concurrent PATCH that re-encrypted it wins). ``False``: it
        changed meanwhile."""


# -- backlog gauges (§15.2, issue 36) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Backlog:
    """What waits, across every tenant: pending jobs and unpublished outbox rows, each with
    the ``created_at`` of its oldest (``None`` when there is none)."""

    pending_jobs: int
    oldest_pending_at: datetime | None
    unsent_events: int
    oldest_unsent_at: datetime | None


class BacklogReader(Protocol):
    """The §15.2 backlog gauges, read at each ``/metrics`` scrape. Errors as the other roles."""

    async def backlog(self) -> Backlog:
        """Counts and oldest ``created_at`` of ``pending`` jobs and of outbox rows without
        ``sent_at``, in one read-only round trip per table; served by existing indexes."""
        ...
