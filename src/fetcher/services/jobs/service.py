"""Job use cases at the Manager (contract §2.8, §3.6 steps 13–16, §3.7, §3.8, §4.6).

``create`` runs after the host has checked size, media type and parsed the JSON object
(§3.6 steps 1–2): validation (3–12), deduplication (13), resolution and ownership (14, 14a),
live tests (14b), the guarded insert (15) and the signed publish (16).

Every use case takes the request's :class:`Principal`: jobs are created, deduplicated and read
within its tenant (§12.5), a product-restricted token acts only for its products (§3.6 step
10a) and sees only their jobs (§12.4), and a job records the token's ``sub`` (``createdBy``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta

from fetcher.engine import Limits
from fetcher.services.api.response_models import JobAccepted, JobResponse, shape
from fetcher.services.connections.directory import ConnectionDirectory, not_found
from fetcher.services.connections.tester import ConnectionTester
from fetcher.services.errors import ApiError
from fetcher.services.events.job_events import EventContext, canceled_event, failed_event
from fetcher.services.infrastructure import WorkPublisher
from fetcher.services.jobs.result_summary import result_member
from fetcher.services.jobs.validation import ValidatedJob, validate_job_request
from fetcher.services.jobs.work_messages import work_message_body, work_message_headers
from fetcher.services.jsontext import compact_json
from fetcher.services.log_context import bind_log_context, id_list
from fetcher.services.metrics import Metrics
from fetcher.services.principal import Principal
from fetcher.services.records import ConnectionRecord, JobRecord, normalized_source
from fetcher.services.store_roles import ActiveDuplicateError, JobStore
from fetcher.services.timeutil import SystemClock, format_ms, new_id
from fetcher.services.tracing import (
    DB_SYSTEM,
    SpanKind,
    sampled_trace_id,
    span,
    trace_headers,
    with_trace_context,
)

__all__ = ["JobService", "job_response"]

log = logging.getLogger(__name__)

DEDUP_WINDOW = timedelta(minutes=5)
LIVE_TEST_CONCURRENCY = 4
PUBLISH_FAILED = "process failed: unable to publish"
CREATED_MESSAGE = "Job created and queued for processing"
DUPLICATE_MESSAGE = "Duplicate request detected - returning existing job"


def job_response(job: JobRecord) -> dict[str, object]:
    """§4.6 JobResponse: documents echoed as submitted; terminal-only members omitted."""
    metadata = json.loads(job.metadata_json)
    if job.status == "failed" and job.error is not None:
        metadata["error"] = job.error
    completed = job.status == "completed"
    terminal = job.completed_at is not None and job.status in ("completed", "failed", "canceled")
    return shape(
        JobResponse,
        {
            "id": job.id,
            "status": job.status,
            "metadata": metadata or None,
            "mappedFields": json.loads(job.mapped_fields_json),
            "filters": json.loads(job.filters_json) if job.filters_json else None,
            "limits": json.loads(job.limits_json) if job.limits_json else None,
            "resultPath": job.result_path if completed else None,
            "resultHmac": job.result_hmac if completed else None,
            "requestHash": job.request_hash,
            "createdAt": format_ms(job.created_at),
            "completedAt": format_ms(job.completed_at) if terminal and job.completed_at else None,
            "createdBy": job.created_by,
            "result": result_member(job),
            "traceId": job.trace_id,
            "retryOf": job.retry_of,
        },
        keep_null=("traceId",),  # §15.3: null when the job's request was not traced
    )


def _accepted(job: JobRecord, *, duplicate: bool) -> dict[str, object]:
    return shape(
        JobAccepted,
        {
            "jobId": job.id,
            "status": job.status,
            "createdAt": format_ms(job.created_at),
            "message": DUPLICATE_MESSAGE if duplicate else CREATED_MESSAGE,
        },
    )


@dataclass
class JobService:
    """``directory`` resolves a job's datasources (§3.6 step 14), ``tester`` live-tests the
    stored ones (step 14b)."""

    store: JobStore
    directory: ConnectionDirectory
    tester: ConnectionTester
    publisher: WorkPublisher
    internal_key: bytes = field(repr=False)
    work_queue: str
    events: EventContext
    max_limits: Limits
    metrics: Metrics
    clock: SystemClock = field(default_factory=SystemClock)

    async def get(self, job_id: str, *, principal: Principal) -> dict[str, object]:
        """§2.8: the tenant's job (§12.5); for a product-restricted token only one whose
        normalized source is one of its products (§12.4). Otherwise ``404 FET-1001``."""
        job = await self.store.get_job(job_id, tenant=principal.tenant)
        if job is None or not principal.may_act_for(normalized_source(job.metadata_json)):
            raise not_found("job")
        return job_response(job)

    async def cancel(self, job_id: str, *, principal: Principal) -> dict[str, object]:
        """§14.4: ``pending``/``processing`` → ``canceled`` by one compare-and-set with its
        ``job.canceled`` outbox row; a processing job's Worker sees the status and stops.
        The job is found as by :meth:`get`; a terminal one → ``409 FET-1104``."""
        job = await self.store.get_job(job_id, tenant=principal.tenant)
        if job is None or not principal.may_act_for(normalized_source(job.metadata_json)):
            raise not_found("job")
        now = self.clock.now()
        event = canceled_event(self.events, job.id, job.metadata_json, now, tenant=job.tenant)
        if not await self.store.cancel_job(
            job.id, canceled_at=now, event=with_trace_context(event)
        ):
            current = await self.store.get_job(job_id, tenant=principal.tenant)
            status = current.status if current is not None else job.status
            raise not_cancelable(status)
        log.info("job canceled", extra={"job_id": job.id, "from_status": job.status})
        canceled = await self.store.get_job(job_id, tenant=principal.tenant)
        return job_response(canceled if canceled is not None else job)

    async def retry(
        self, job_id: str, *, request_id: str, principal: Principal
    ) -> tuple[dict[str, object], bool]:
        """§14.5: submit a ``failed`` or ``canceled`` job's request again through the whole
        §3.6 path (validation, live tests, deduplication); answers as :meth:`create`, and a new
        job records ``retryOf``. Found as by :meth:`get`; another status → ``409 FET-1105``."""
        job = await self.store.get_job(job_id, tenant=principal.tenant)
        if job is None or not principal.may_act_for(normalized_source(job.metadata_json)):
            raise not_found("job")
        if job.status not in ("failed", "canceled"):
            raise ApiError(
                "FET-1105",
                f"only a failed or canceled job can be retried: it is {job.status}",
                title="Job Not Retryable",
            )
        data_request: dict[str, object] = {"mappedFields": json.loads(job.mapped_fields_json)}
        if job.filters_json:
            data_request["filters"] = json.loads(job.filters_json)
        if job.limits_json:
            data_request["limits"] = json.loads(job.limits_json)
        body = {"dataRequest": data_request, "metadata": json.loads(job.metadata_json)}
        return await self.create(body, request_id=request_id, principal=principal, retry_of=job.id)

    async def create(
        self,
        body: Mapping[str, object],
        *,
        request_id: str,
        principal: Principal,
        retry_of: str | None = None,
    ) -> tuple[dict[str, object], bool]:
        """Returns the §2.8 body and whether a new job was created (202) or matched (200).
        ``retry_of`` is recorded on a new job (§14.5)."""
        with span("validate job"):
            job = validate_job_request(body, max_limits=self.max_limits, principal=principal)
        tenant = principal.tenant
        existing = await self._dedup_match(job.request_hash, tenant)
        if existing is not None:
            return self._duplicate(existing)
        stored = await self._resolve(job, tenant)
        self._check_ownership(job, stored)
        await self._live_test(stored)
        record = replace(self._record(job, stored, request_id, principal), retry_of=retry_of)
        existing = await self._insert(record, job.request_hash, tenant)
        if existing is not None:
            return self._duplicate(existing)
        ids = id_list(record.connection_ids.values())
        bind_log_context(job_id=record.id, product=job.source, connection_id=ids)
        log.info("job created")
        await self._publish(record, request_id)
        log.info("work message published")
        self.metrics.jobs_created.labels("created").inc()
        return _accepted(record, duplicate=False), True

    async def _insert(self, record: JobRecord, request_hash: str, tenant: str) -> JobRecord | None:
        """§3.6 step 15: store the pending job; an active duplicate stored meanwhile wins
        (returned). Its span is the job's write, which the work message's publish follows."""
        with span("store job", attributes={"db.operation.name": "INSERT"}):
            for _attempt in range(2):
                try:
                    await self.store.insert_job(record)
                    return None
                except ActiveDuplicateError:
                    existing = await self._dedup_match(request_hash, tenant)
                    if existing is not None and existing.status in ("pending", "processing"):
                        return existing
            raise ApiError("FET-0002", "active duplicate vanished twice")

    def _duplicate(self, job: JobRecord) -> tuple[dict[str, object], bool]:
        self.metrics.jobs_created.labels("duplicate").inc()
        return _accepted(job, duplicate=True), False

    async def _dedup_match(self, request_hash: str, tenant: str) -> JobRecord | None:
        """§3.8 within the tenant (§12.5): the same request in two tenants is two jobs."""
        return await self.store.find_dedup_match(
            request_hash, self.clock.now() - DEDUP_WINDOW, tenant=tenant
        )

    async def _resolve(self, job: ValidatedJob, tenant: str) -> dict[str, ConnectionRecord]:
        """§3.6 step 14: every datasource resolves to exactly one internal datasource the
        tenant sees or one of the tenant's stored connections (§12.5)."""
        names = sorted(job.mapped_fields)
        internal = self.directory.internal_for(tenant)
        stored: dict[str, ConnectionRecord] = {}
        missing: list[str] = []
        for name in names:
            record = await self.directory.stored_by_name(name, tenant=tenant)
            if record is not None and name in internal:
                raise _missing(f"datasource '{name}' is ambiguous")
            if record is not None:
                stored[name] = record
            elif name not in internal:
                missing.append(name)
        if len(missing) == len(names):
            raise ApiError(
                "FET-1020",
                "No connections configured for the requested datasources",
                title="No Connections Found",
            )
        if missing:
            raise _missing(f"No connection configured for datasource '{missing[0]}'")
        return stored

    def _check_ownership(self, job: ValidatedJob, stored: Mapping[str, ConnectionRecord]) -> None:
        """§3.6 step 14a / §3.7, in sorted order; internal datasources are exempt."""
        for name in sorted(stored):
            product = stored[name].product_name
            if not product:
                raise ApiError(
                    "FET-1014",
                    f"Connection '{name}' has no product assigned. "
                    "Use the migration endpoint to assign it first.",
                )
            if product != job.source:
                raise ApiError(
                    "FET-1016",
                    f"Connection '{name}' does not belong to the product identified by "
                    f"source '{job.metadata.get('source')}'",
                )

    async def _live_test(self, stored: Mapping[str, ConnectionRecord]) -> None:
        """§3.6 step 14b: every stored connection, up to 4 in parallel, 10 s each."""
        gate = asyncio.Semaphore(LIVE_TEST_CONCURRENCY)

        async def one(record: ConnectionRecord) -> bool:
            attributes = {"db.system": DB_SYSTEM.get(record.type, "other_sql")}
            attributes["fetcher.datasource"] = record.config_name
            async with gate:
                with span(f"test connection {record.config_name}", attributes=attributes) as s:
                    ok = await self.tester.probe(record)
                    s.set_attribute("fetcher.connection.available", ok)
                    return ok

        names = sorted(stored)
        results = await asyncio.gather(*(one(stored[n]) for n in names))
        for name, ok in zip(names, results, strict=True):
            if not ok:
                raise ApiError("FET-1040", f"Connection '{name}' is not available")

    def _record(
        self,
        job: ValidatedJob,
        stored: Mapping[str, ConnectionRecord],
        request_id: str,
        principal: Principal,
    ) -> JobRecord:
        now = self.clock.now()
        return JobRecord(
            id=new_id(),
            status="pending",
            request_hash=job.request_hash,
            mapped_fields_json=compact_json(job.mapped_fields),
            metadata_json=compact_json(job.metadata),
            filters_json=compact_json(job.raw_filters) if job.raw_filters else None,
            limits_json=compact_json(job.raw_limits) if job.raw_limits else None,
            connection_ids={name: record.id for name, record in stored.items()},
            request_id=request_id,
            created_at=now,
            updated_at=now,
            tenant=principal.tenant,
            created_by=principal.sub,
            trace_id=sampled_trace_id(),  # §15.3: the request span is current here
        )

    async def _publish(self, job: JobRecord, request_id: str) -> None:
        """§3.6 step 16: on failure the job is failed with its event, then 503 FET-0003."""
        body = work_message_body(job)
        headers = work_message_headers(
            self.internal_key, job, body, routing_key=self.work_queue, request_id=request_id
        )
        try:
            await self._send(body, headers)
        except Exception:
            log.exception("work message publish failed", extra={"job_id": job.id})
            now = self.clock.now()
            event = failed_event(
                self.events, job.id, job.metadata_json, PUBLISH_FAILED, now, tenant=job.tenant
            )
            await self.store.fail_job(
                job.id,
                from_statuses=("pending",),
                error=PUBLISH_FAILED,
                completed_at=now,
                event=with_trace_context(event),
            )
            raise ApiError(
                "FET-0003", "The service is temporarily unavailable. Please try again later."
            ) from None

    async def _send(self, body: bytes, headers: dict[str, str | int]) -> None:
        """The publish span (messaging semantic conventions); the Worker continues its trace
        from ``traceparent``, which travels outside the §7.3 signed set."""
        attributes: dict[str, str | int] = {
            "messaging.system": "rabbitmq",
            "messaging.operation.type": "send",
            "messaging.destination.name": self.work_queue,
            "messaging.message.body.size": len(body),
        }
        with span(f"send {self.work_queue}", kind=SpanKind.PRODUCER, attributes=attributes):
            await self.publisher.publish_work(body, {**headers, **trace_headers()})


def not_cancelable(status: str) -> ApiError:
    """§14.4: ``409 FET-1104`` for a job already in a terminal status."""
    return ApiError(
        "FET-1104", f"the job cannot be canceled: it is {status}", title="Job Not Cancelable"
    )


def _missing(message: str) -> ApiError:
    return ApiError("FET-1020", message, title="Missing Data Source")
