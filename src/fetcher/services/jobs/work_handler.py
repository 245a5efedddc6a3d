"""Work-message handling (contract §4.2, §7.4): verify, claim, run — ack/reject tied to it.

Every row of the §7.4 table has one branch here. Nothing is ever requeued with
``nack(requeue=true)``: a message is acked, dead-lettered, or (transient store failure before
the claim) republished with ``x-retry-count`` + 1 at most three times.

Tenancy (§12.5): the signature covers the ``X-Tenant-ID`` line (§7.3), and the job is loaded
within that tenant only, so a job of another tenant is an unknown job (row 5). A tenant header
that does not fit the mode is dead-lettered as an invalid message (reason ``payload``, no job
touched; the contract is silent, see :meth:`WorkHandler._tenant`): ``X-Tenant-ID`` on a
single-tenant Worker, none (or one breaking the tenant pattern) on a multi-tenant Worker.
Such a message comes from a Manager in the other mode (a configuration mismatch); the DLQ
keeps it for a replay once the modes agree, and its job is ended by the reaper meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from fetcher.crypto import SIGNATURE_VERSION, extract_job_id, is_tenant_id, verify_message
from fetcher.services.events.job_events import EventContext, failed_event
from fetcher.services.infrastructure import Delivery, WorkPublisher
from fetcher.services.jobs.extraction import ExtractionService, log_job_failed
from fetcher.services.jobs.failure_summary import summarise_failure
from fetcher.services.jobs.work_messages import TENANT_HEADER, signed_work_headers
from fetcher.services.log_context import bind_log_context
from fetcher.services.metrics import Metrics
from fetcher.services.store_roles import JobStore, StoreUnavailableError
from fetcher.services.timeutil import SystemClock
from fetcher.services.tracing import SpanKind, extracted_context, span, with_trace_context

__all__ = ["WorkHandler"]

log = logging.getLogger(__name__)

EXPIRED = "work message expired before processing"
MAX_RETRIES = 3
FUTURE_SKEW_SECONDS = 30
_T_RE = re.compile(r"[0-9]{1,12}")
_JOB_ID_RE = re.compile(r'"jobId"\s*:\s*"([0-9a-fA-F-]{36})"')


class _Rejected(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _signing_time(headers: Mapping[str, object]) -> tuple[int, str] | None:
    """§7.4 row 1: ``t`` as an integer and as the signed text (a decimal string is signed as
    sent, leading zeros included), or ``None`` when a header is missing or malformed."""
    t, version, signature = (
        headers.get(k) for k in ("t", "signature-version", "x-message-signature")
    )
    if t is None or version != SIGNATURE_VERSION or not isinstance(signature, str):
        return None
    if isinstance(t, bool):
        return None
    if isinstance(t, int):
        return (t, str(t)) if 0 <= t < 10**12 else None
    if isinstance(t, bytes):
        t = t.decode("ascii", "replace")
    return (int(t), t) if isinstance(t, str) and _T_RE.fullmatch(t) else None


def _tenant_line(headers: Mapping[str, object]) -> str | None:
    """§7.3: the signed tenant line, the ``X-Tenant-ID`` value or ``""`` without one; ``None``
    when the header is not text (the message is then rejected like a bad signature)."""
    value = headers.get(TENANT_HEADER)
    if value is None:
        return ""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def _is_uuid(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return str(uuid.UUID(value)) == value.lower() and len(value) == 36
    except ValueError:
        return False


def _payload_problem(body: bytes) -> tuple[str | None, str | None]:
    """§7.4 row 4: (the reason the payload is invalid or None, the recoverable jobId)."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        match = _JOB_ID_RE.search(body.decode("utf-8", "replace"))
        return "body is not valid JSON", match.group(1).lower() if match else None
    if not isinstance(doc, dict):
        return "body is not a JSON object", None
    job_id = doc.get("jobId")
    if not isinstance(job_id, str) or not _is_uuid(job_id):
        return "jobId is missing or not a UUID", None
    recovered = job_id.lower()
    mapped = doc.get("mappedFields")
    if not isinstance(mapped, dict) or not mapped:
        return "mappedFields is missing or empty", recovered
    for name, tables in mapped.items():
        if not isinstance(tables, dict) or not tables:
            return f"datasource '{name}' has no tables", recovered
    return None, recovered


@dataclass
class WorkHandler:
    store: JobStore
    extraction: ExtractionService
    republisher: WorkPublisher
    internal_key: bytes = field(repr=False)
    events: EventContext
    metrics: Metrics
    pending_timeout: int = 3600
    clock: SystemClock = field(default_factory=SystemClock)
    retry_base_seconds: float = 1.0
    #: ``MULTI_TENANT_ENABLED`` (§12.5): every message must name its job's tenant.
    multi_tenant: bool = False
    #: §14.3: the internal keys of ``APP_ENC_KEY_PREVIOUS``, also accepted on a work message,
    #: so a Worker rotated first still takes the messages of Managers not yet rotated
    #: (docs/key-rotation.md). Retries are signed with ``internal_key``.
    previous_internal_keys: tuple[bytes, ...] = field(default=(), repr=False)

    async def handle(self, delivery: Delivery) -> None:
        """Handle one delivery completely (including the job it starts), in one consumer span
        that continues the Manager's trace when the message carries a valid ``traceparent``
        (outside the signed set: a forged one can only misplace the span, issue 22)."""
        attributes: dict[str, str | int] = {
            "messaging.system": "rabbitmq",
            "messaging.operation.type": "process",
            "messaging.destination.name": delivery.routing_key,
            "messaging.message.body.size": len(delivery.body),
        }
        parent = extracted_context(delivery.headers)
        name = f"process {delivery.routing_key}"
        with span(name, kind=SpanKind.CONSUMER, attributes=attributes, parent=parent):
            await self._handle(delivery)

    async def _handle(self, delivery: Delivery) -> None:
        try:
            admitted = await self._admit(delivery)
        except _Rejected as rejected:
            self.metrics.messages_rejected.labels(rejected.reason).inc()
            await delivery.reject()
            return
        if admitted is None:
            return
        job_id, tenant = admitted
        await self.extraction.run_claimed(job_id, tenant=tenant)

    async def _admit(self, delivery: Delivery) -> tuple[str, str] | None:
        """Rows 1–8 up to the claim. Returns the claimed job's ID and tenant, or ``None`` when
        the message was acked without work; raises :class:`_Rejected` to dead-letter it."""
        headers, body = delivery.headers, delivery.body
        signed, tenant_line = _signing_time(headers), _tenant_line(headers)
        if (
            signed is None
            or tenant_line is None
            or not any(
                verify_message(
                    key,
                    str(headers["x-message-signature"]),
                    t=signed[1],
                    body=body,
                    exchange=delivery.exchange,
                    routing_key=delivery.routing_key,
                    tenant=tenant_line,
                    job_id=extract_job_id(body),
                )
                for key in (self.internal_key, *self.previous_internal_keys)
            )
        ):
            raise _Rejected("signature")
        tenant = self._tenant(tenant_line)
        now, t = time.time(), signed[0]
        if t < now - self.pending_timeout or t > now + FUTURE_SKEW_SECONDS:
            await self._fail_pending(extract_job_id(body), EXPIRED, tenant)
            raise _Rejected("expired")
        header_job = headers.get("jobId")
        body_job = extract_job_id(body)
        if body_job and header_job is not None and str(header_job) != body_job:
            raise _Rejected("payload")
        problem, recovered = _payload_problem(body)
        if problem is not None:
            recovered = recovered or (str(header_job).lower() if _is_uuid(header_job) else None)
            await self._fail_pending(recovered, f"invalid work message: {problem}", tenant)
            raise _Rejected("payload")
        if recovered is None:  # a valid payload always names its job
            raise _Rejected("payload")
        claimed = await self._claim(delivery, recovered, tenant)
        return (recovered, tenant) if claimed else None

    def _tenant(self, line: str) -> str:
        """The tenant of a verified message, checked against the mode (§12.5).

        The contract says what a matching message means, not what a mismatched one does; this
        Worker dead-letters it as an invalid message (reason ``payload``) without touching any
        job: a multi-tenant Worker cannot know which tenant a header-less job belongs to, and
        a single-tenant Worker must not run a tenant's job with the global keys.
        """
        if self.multi_tenant and is_tenant_id(line):
            return line
        if not self.multi_tenant and line == "":
            return ""
        log.warning(
            "work message dead-lettered: %s in %s mode",
            f"X-Tenant-ID {line[:64]!r}" if line else "no X-Tenant-ID",
            "multi-tenant" if self.multi_tenant else "single-tenant",
        )
        raise _Rejected("payload")

    async def _claim(self, delivery: Delivery, job_id: str, tenant: str) -> bool:
        """Rows 5–8: load the job within ``tenant``, claim it, ack. ``True`` when claimed."""
        # This delivery's own task: every later line carries the job and the Manager's request.
        request_id = str(delivery.headers.get("x-request-id") or "")[:128]
        bind_log_context(job_id=job_id, request_id=request_id)
        try:
            with span("claim job", attributes={"fetcher.job_id": job_id}) as claim:
                job = await self.store.get_job(job_id, tenant=tenant)
                if job is None:  # §12.5: another tenant's job is an unknown job
                    log.warning("work message for unknown job %s dropped", job_id)
                    await delivery.ack()
                    return False
                claimed = await self.store.claim_job(job_id, self.clock.now())
                claim.set_attribute("fetcher.claimed", claimed)
        except StoreUnavailableError:
            await self._retry(delivery, tenant)
            return False
        await self._ack_after_claim(delivery, claimed=claimed)
        log.info("job claimed" if claimed else "work message acknowledged: job not pending")
        if not claimed and job.status == "canceled":
            self.extraction.on_commit()  # §14.4: publish the Manager's job.canceled row now
        return claimed

    @staticmethod
    async def _ack_after_claim(delivery: Delivery, *, claimed: bool) -> None:
        """§4.2: ack right after the claim; from then on the job row is the only record. An ack
        that fails (the broker connection dropped meanwhile) must not strand a claimed job in
        ``processing`` until the reaper: the job runs anyway, and the redelivered copy is
        acknowledged and dropped by the claim CAS (§7.4 row 6)."""
        try:
            await delivery.ack()
        except Exception as exc:
            log.warning(
                "work message ack failed after the claim (%s)%s",
                type(exc).__name__,
                "; the job runs and its redelivery will be dropped" if claimed else "",
            )

    async def _retry(self, delivery: Delivery, tenant: str) -> None:
        """§7.4 row 7: republish re-signed (same tenant) with ``x-retry-count`` + 1 after 1, 2,
        4 s."""
        raw = delivery.headers.get("x-retry-count", 0)
        retries = int(raw) if isinstance(raw, int | str) and str(raw).isdigit() else 0
        if retries >= MAX_RETRIES:
            raise _Rejected("retries_exhausted")
        await asyncio.sleep(self.retry_base_seconds * 2**retries)
        base = {k: v for k, v in delivery.headers.items() if isinstance(v, str | int)}
        base["x-retry-count"] = retries + 1
        headers = signed_work_headers(
            self.internal_key,
            delivery.body,
            routing_key=delivery.routing_key,
            base=base,
            tenant=tenant,
        )
        await self.republisher.publish_work(delivery.body, headers)
        await delivery.ack()

    async def _fail_pending(self, job_id: str | None, error: str, tenant: str) -> None:
        """Rows 3 and 4: fail the tenant's job only while it is still ``pending``."""
        if not job_id:
            return
        try:
            job = await self.store.get_job(job_id, tenant=tenant)
            if job is None or job.status != "pending":
                return
            now = self.clock.now()
            event = failed_event(
                self.events, job.id, job.metadata_json, error, now, tenant=job.tenant
            )
            if await self.store.fail_job(
                job.id,
                from_statuses=("pending",),
                error=error,
                completed_at=now,
                event=with_trace_context(event),
            ):
                self.extraction.on_commit()
                log_job_failed(summarise_failure(error), job.id)
        except StoreUnavailableError:
            log.warning(
                "could not fail job %s (%s); the reaper will",
                job_id,
                summarise_failure(error).message,
            )
