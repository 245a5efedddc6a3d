"""The stale-job reaper (contract §4.4): every job ends in one terminal event.

Each tick fails ``pending`` jobs older than ``PENDING_TIMEOUT_SECONDS`` and ``processing`` jobs
whose claim is older than their own ``timeoutSeconds`` + ``STORAGE_TIMEOUT_SECONDS`` + 180 s,
each with its ``job.failed`` outbox row in the same transaction. The CAS makes a race with a
Worker that finishes at the same moment harmless.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import timedelta

from fetcher.engine import Limits
from fetcher.services.events.job_events import EventContext, failed_event
from fetcher.services.records import JobRecord, JobStatus
from fetcher.services.store_roles import JobStore
from fetcher.services.timeutil import SystemClock

__all__ = ["ABANDONED", "NOT_PROCESSED", "StaleJobReaper"]

log = logging.getLogger(__name__)

ABANDONED = "extraction abandoned: worker stopped before completion"
NOT_PROCESSED = "work message was not processed"
GRACE_SECONDS = 180
REAP_BATCH = 500


@dataclass
class StaleJobReaper:
    store: JobStore
    events: EventContext
    max_limits: Limits
    pending_timeout: int
    storage_timeout: int
    clock: SystemClock = field(default_factory=SystemClock)

    def processing_threshold(self, job: JobRecord) -> timedelta:
        limits = json.loads(job.limits_json) if job.limits_json else {}
        timeout = limits.get("timeoutSeconds", self.max_limits.timeout_seconds)
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
            timeout = self.max_limits.timeout_seconds
        return timedelta(seconds=timeout + self.storage_timeout + GRACE_SECONDS)

    async def tick(self) -> int:
        """Fail every stale job found now; returns how many were failed."""
        now = self.clock.now()
        candidates = await self.store.reap_candidates(
            pending_created_before=now - timedelta(seconds=self.pending_timeout),
            processing_started_before=now
            - timedelta(seconds=1 + self.storage_timeout + GRACE_SECONDS),
            limit=REAP_BATCH,
        )
        failed = 0
        for job in candidates:
            if job.status == "processing":
                started = job.started_at or job.created_at
                if now - started <= self.processing_threshold(job):
                    continue
                failed += await self.fail(job, "processing", ABANDONED)
            elif job.status == "pending":
                failed += await self.fail(job, "pending", NOT_PROCESSED)
        return failed

    async def fail(self, job: JobRecord, status: JobStatus, error: str) -> int:
        """Fail ``job`` from ``status`` with its event; 1 when the CAS matched, else 0."""
        now = self.clock.now()
        event = failed_event(self.events, job.id, job.metadata_json, error, now, tenant=job.tenant)
        done = await self.store.fail_job(
            job.id, from_statuses=(status,), error=error, completed_at=now, event=event
        )
        if done:
            log.warning("reaped stale %s job %s", status, job.id)
        return int(done)
