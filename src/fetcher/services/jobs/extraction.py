"""The Worker's use case after a successful claim (contract §4.3, §4.5, §6.3, §8.6).

Resolve datasources from the connection IDs recorded on the job, run the engine, stream the
document through HMAC → AES-256-GCM → base64 into object storage, then record the terminal
status and its outbox event in one transaction and hand the event to the relay. Every failure
after the claim fails the job with the §4.5 text (detail redacted, §8.7).

Tenancy (§12.5): the job is loaded within the tenant its work message named; its object is
stored under ``<tenantId>/``, encrypted with the tenant's storage key, its ``resultHmac`` and
event made with the tenant's external key. The tenant ``""`` (single-tenant mode) uses the
global keys and no key prefix, exactly as before tenancy.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from contextvars import ContextVar
from dataclasses import dataclass, field

from fetcher.crypto import HmacStream, KeySet, ObjectEncryptor, Redactor
from fetcher.crypto.redact import LOG_REDACTED
from fetcher.engine import (
    ConnectionDescriptor,
    Engine,
    EngineError,
    ErrorCategory,
    ExtractionRequest,
    ExtractionResult,
)
from fetcher.engine.kit import parse_filters
from fetcher.services.connections.credentials import CredentialCipher, CredentialError
from fetcher.services.connections.internal_datasources import visible_internal
from fetcher.services.connections.ssrf import BlockedHostError, HostResolutionError, pin_descriptor
from fetcher.services.connections.stored import descriptor_from_record
from fetcher.services.events.job_events import (
    CompletedResult,
    EventContext,
    completed_event,
    failed_event,
)
from fetcher.services.infrastructure import ObjectStore, ObjectWriter
from fetcher.services.jobs.failure_summary import FailureSummary, summarise_failure
from fetcher.services.jobs.result_summary import summary_json
from fetcher.services.log_context import bind_log_context, id_list, log_context
from fetcher.services.metrics import Metrics, category_label, engine_label
from fetcher.services.records import JobRecord
from fetcher.services.store_roles import ConnectionLookup, JobStore
from fetcher.services.timeutil import SystemClock
from fetcher.services.tracing import current_span, mark_failed, span, with_trace_context

__all__ = ["ExtractionService", "log_job_failed", "object_key"]

log = logging.getLogger(__name__)

RECORD_FAILED = "failed to record job completion"
INTERNAL_ERROR = "internal error"
#: §2.9: the detail of a Worker connect the SSRF guard blocked (exact).
BLOCKED_HOST_DETAIL = "host is not a valid external database endpoint"
#: Bound on the pre-dial name resolution (the connect budget of §2.6.7).
PREDIAL_TIMEOUT_SECONDS = 10


def object_key(job_id: str, prefix: str, tenant: str = "") -> str:
    """§6.3: ``<P>/<tenantPrefix>external-data/<jobId>.json`` with the prefix's slashes
    stripped; ``<tenantPrefix>`` is ``<tenantId>/`` for a tenant's job (§12.5), else empty."""
    prefix = prefix.strip("/")
    key = f"{tenant}/external-data/{job_id}.json" if tenant else f"external-data/{job_id}.json"
    return f"{prefix}/{key}" if prefix else key


#: Plaintext encrypted per step by the result sink (§6.3 bytes do not depend on it).
SEAL_SLICE_BYTES = 1024 * 1024


class _EncryptingSink:
    """ResultSink: HMAC over the plaintext, streaming GCM, base64 into the object writer.

    The object is opened lazily on the first chunk, so a job that fails before serialization
    never starts an upload. The first datasource streams here while extraction runs (§4.3.1
    direct streaming), so the caller's exit stack aborts the upload on any error, the size
    limit included (§4.3 step 5, §5.5: no object remains).
    """

    def __init__(
        self,
        keys: KeySet,
        open_writer: Callable[[], Awaitable[ObjectWriter]],
        b64encode: Callable[[bytes | memoryview], bytes],
    ) -> None:
        # ``keys`` is the job's tenant's set (KeySet.for_tenant, §12.5).
        self._hmac = HmacStream(keys.external_hmac)
        self._encryptor = ObjectEncryptor(keys.storage, b64encode=b64encode)
        self._open_writer = open_writer
        self._writer: ObjectWriter | None = None
        #: Stored bytes written so far (the summary's ``sizeBytes``, §14.1).
        self.stored_bytes = 0

    async def _writer_ready(self) -> ObjectWriter:
        if self._writer is None:
            self._writer = await self._open_writer()
        return self._writer

    async def write(self, chunk: bytes) -> None:
        """Sealed :data:`SEAL_SLICE_BYTES` at a time: a chunk of any size (one huge value)
        never has its ciphertext, base64 or object part made whole in memory."""
        writer = await self._writer_ready()
        with memoryview(chunk) as view:
            for start in range(0, len(view), SEAL_SLICE_BYTES):
                piece = view[start : start + SEAL_SLICE_BYTES]
                self._hmac.update(piece)
                out = self._encryptor.update(piece)
                if out:
                    self.stored_bytes += len(out)
                    await writer.write(out)

    async def finish(self) -> str:
        """Write the GCM tag; return the hex HMAC of everything written."""
        writer = await self._writer_ready()
        tail = self._encryptor.finalize()
        self.stored_bytes += len(tail)
        await writer.write(tail)
        return self._hmac.hexdigest()


@dataclass(slots=True)
class _CancelWatch:
    """One run's cancellation state: ``recording`` once the completion CAS is under way (the
    watcher then leaves the run alone; the CAS decides), ``stopped`` once the watcher
    canceled the run because the job was canceled."""

    recording: bool = False
    stopped: bool = False
    #: The status the watcher saw when it stopped the run (``None`` for a vanished job).
    seen: str | None = None
    #: The §4.5 category the run's ``_fail`` recorded (the run is its own task and context).
    category: str | None = None


@dataclass(frozen=True, slots=True)
class _Stored:
    """What the object store holds once the sink finished: its HMAC and stored size."""

    hmac: str
    size_bytes: int


@dataclass
class ExtractionService:
    """``store`` holds the job's transitions; ``connections`` the stored connections its
    datasources name (both roles of the one metadata store)."""

    store: JobStore
    connections: ConnectionLookup
    objects: ObjectStore
    engine: Engine
    keys: KeySet = field(repr=False)
    cipher: CredentialCipher
    events: EventContext
    metrics: Metrics
    key_prefix: str = ""
    storage_timeout: float = 120.0
    internal: Mapping[str, ConnectionDescriptor] = field(default_factory=dict)
    #: §12.5 ``DATASOURCE_<NAME>_TENANTS`` by configName: which tenants' jobs may use which
    #: internal datasource (the tenant ``""`` uses every one).
    internal_tenants: Mapping[str, frozenset[str]] = field(default_factory=dict)
    redactor: Redactor = field(default_factory=Redactor)
    clock: SystemClock = field(default_factory=SystemClock)
    on_commit: Callable[[], None] = field(default=lambda: None)
    #: ``SSRF_GUARD_ENABLED``: pre-dial and pin every stored datasource (§2.9, §2.9.1).
    ssrf_guard: bool = False
    #: The base64 encoder of the stored object (§6.3): the standard library's, or one the
    #: host hands that writes exactly the same bytes, faster (bootstrap: ``pybase64``).
    b64encode: Callable[[bytes | memoryview], bytes] = base64.b64encode
    #: §14.3: ``APP_ENC_KEY_VERSION``, recorded with every object ``keys`` seal.
    key_version: str = "1"
    #: §14.4: how often a running job's status is read to notice a cancel (well inside the
    #: contract's 2 s).
    cancel_poll_seconds: float = 0.5

    async def run_claimed(self, job_id: str, *, tenant: str = "") -> str:
        """Run a job of ``tenant`` this Worker has just claimed; it ends in one terminal
        transition.

        Returns the terminal status written (or ``"lost"`` when the job vanished). Every line
        logged meanwhile carries the job's ID, product and connection IDs.
        """
        self.metrics.jobs_in_flight.inc()
        try:
            with log_context(job_id=job_id), span("run job", attributes={"fetcher.job_id": job_id}):
                return await self._run_claimed(job_id, tenant)
        finally:
            self.metrics.jobs_in_flight.dec()

    async def _run_claimed(self, job_id: str, tenant: str) -> str:
        loop = asyncio.get_running_loop()
        started = loop.time()
        job = await self.store.get_job(job_id, tenant=tenant)
        if job is None:
            log.warning("claimed job vanished: %s", job_id)
            return "lost"
        product = str(json.loads(job.metadata_json).get("source", "")).strip().lower()
        bind_log_context(product=product, connection_id=id_list(job.connection_ids.values()))
        log.info("extraction started")
        if job.started_at is not None:  # §15.2 wait: creation → this claim
            self.metrics.job_wait.observe(
                max(0.0, (job.started_at - job.created_at).total_seconds())
            )
        _failure_category.set(None)
        known: dict[str, ConnectionDescriptor] = {}
        resolved: Mapping[str, ConnectionDescriptor] = known  # internal ones too, once resolved
        watch = _CancelWatch()

        async def attempt() -> str:
            nonlocal resolved
            try:
                resolved = connections = await self._resolve(job, known)
                request = self._request(job)
                return await self._extract_and_complete(job, request, connections, watch)
            except EngineError as exc:
                return await self._fail(job, await self._failure_text(exc, known))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("job %s failed unexpectedly", job_id)
                return await self._fail(job, INTERNAL_ERROR)
            finally:  # this task's context holds the category its _fail set; hand it over
                watch.category = _failure_category.get()

        work = asyncio.ensure_future(attempt())
        watcher = asyncio.create_task(self._watch_cancel(job.id, work, watch))
        try:
            status = await work
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not watch.stopped or (current is not None and current.cancelling()):
                raise  # this Worker is stopping, not the job
            status = "canceled" if watch.seen == "canceled" else "lost"
            log.info("job %s: extraction stopped, its spools and upload discarded", watch.seen)
        finally:
            watcher.cancel()
        _failure_category.set(watch.category)
        self.metrics.jobs_finished.labels(status).inc()
        self.metrics.job_duration.observe(loop.time() - started)
        self._observe_outcome(status, product, resolved, loop.time() - started)
        return status

    async def _watch_cancel(
        self, job_id: str, work: asyncio.Future[str], watch: _CancelWatch
    ) -> None:
        """§14.4: every :attr:`cancel_poll_seconds`, read the job's status; once it is no
        longer ``processing`` (a cancel, or the reaper) and the completion is not being
        recorded, cancel the extraction. asyncio delivers that at the engine's next await —
        between batches or while it waits on the source — and every exit stack on the way out
        deletes the spools and discards the upload (:meth:`ObjectStore.open_writer`)."""
        while not work.done():
            await asyncio.sleep(self.cancel_poll_seconds)
            try:
                status = await self.store.job_status(job_id)
            except Exception:
                log.warning("cancellation poll failed; retrying", exc_info=True)
                continue
            if status != "processing" and not watch.recording:
                watch.stopped, watch.seen = True, status
                work.cancel()
                self.on_commit()  # the relay publishes the canceler's job.canceled row now
                return

    def _observe_outcome(
        self,
        status: str,
        product: str,
        connections: Mapping[str, ConnectionDescriptor],
        seconds: float,
    ) -> None:
        """§15.2: the terminal job by bounded product, engine and category, and its run time."""
        if status not in ("completed", "failed"):
            return
        engine = engine_label(d.type.value for d in connections.values())
        category = category_label(_failure_category.get() if status == "failed" else None)
        labels = (status, self.metrics.product_label(product), engine, category)
        self.metrics.job_outcomes.labels(*labels).inc()
        self.metrics.job_run.labels(engine).observe(seconds)

    async def _failure_text(
        self, exc: EngineError, known: Mapping[str, ConnectionDescriptor]
    ) -> str:
        """The §4.5 text of a failed job: its detail redacted once (§8.7), with the values of
        every datasource resolved so far, off the event loop when long (§13 "Blocking work")."""
        if exc.detail is None:
            return exc.text()
        redacted = await self._redactor_for(known).redact_async(exc.detail)
        return exc.text(lambda _detail: redacted)

    async def _resolve(
        self, job: JobRecord, known: dict[str, ConnectionDescriptor]
    ) -> dict[str, ConnectionDescriptor]:
        """§4.3 step 1: internal by name, stored by the recorded connection ID, ownership
        re-checked, credentials decrypted; the first failure in code-point order wins.

        Every descriptor is entered in ``known`` as soon as it exists (and again once pinned),
        so a failure's detail is redacted with its values (§8.7 step 1)."""
        mapped = json.loads(job.mapped_fields_json)
        source = str(json.loads(job.metadata_json).get("source", "")).strip().lower()
        resolved: dict[str, ConnectionDescriptor] = {}
        internal = visible_internal(self.internal, self.internal_tenants, job.tenant)
        for name in sorted(mapped):
            connection_id = job.connection_ids.get(name)
            if name in internal and connection_id is not None:
                raise EngineError(ErrorCategory.CONFLICT, f"datasource '{name}' is ambiguous")
            if name in internal:
                resolved[name] = internal[name]
                continue
            record = (  # §12.5: only a connection of the job's own tenant
                await self.connections.get_connection(connection_id, tenant=job.tenant)
                if connection_id
                else None
            )
            if record is None:
                raise EngineError(ErrorCategory.NOT_FOUND, f"datasource '{name}' is not configured")
            if record.product_name != source:
                raise EngineError(
                    ErrorCategory.FORBIDDEN,
                    f"datasource '{name}' does not belong to the job's product",
                )
            try:
                descriptor = descriptor_from_record(record, self.cipher, config_name=name)
            except CredentialError as exc:
                raise EngineError(
                    ErrorCategory.INTERNAL,
                    f"failed to decrypt credentials for datasource '{name}'",
                    detail=exc.reason,
                ) from None
            known[name] = descriptor
            resolved[name] = known[name] = await self._guarded(name, descriptor)
        return resolved

    async def _guarded(self, name: str, descriptor: ConnectionDescriptor) -> ConnectionDescriptor:
        """§2.9 Worker connect under the guard: resolve once, vet every address, pin the
        vetted one (§2.9.1). Internal datasources never reach here (§9.4)."""
        if not self.ssrf_guard or not descriptor.host:
            return descriptor
        failed = f"failed to connect to datasource '{name}'"
        try:
            async with asyncio.timeout(PREDIAL_TIMEOUT_SECONDS):
                return await pin_descriptor(descriptor)
        except BlockedHostError:
            raise EngineError(ErrorCategory.CONNECT, f"{failed}: {BLOCKED_HOST_DETAIL}") from None
        except HostResolutionError as exc:  # the detail is redacted once, with the host
            raise EngineError(ErrorCategory.CONNECT, failed, detail=exc.detail) from None
        except TimeoutError:
            raise EngineError(
                ErrorCategory.CONNECT, failed, detail="name resolution timed out"
            ) from None

    def _request(self, job: JobRecord) -> ExtractionRequest:
        """The engine request, with limits recomputed against this Worker's maxima (§3.5)."""
        mapped = json.loads(job.mapped_fields_json)
        raw_filters = json.loads(job.filters_json) if job.filters_json else None
        raw_limits = json.loads(job.limits_json) if job.limits_json else None
        return ExtractionRequest(
            job_id=job.id,
            mapped_fields={
                ds: {table: tuple(fields) for table, fields in tables.items()}
                for ds, tables in mapped.items()
            },
            filters=parse_filters(raw_filters, mapped),
            limits=self.engine.limits.lowered(raw_limits),
            metadata=json.loads(job.metadata_json),
        )

    def _redactor_for(self, connections: Mapping[str, ConnectionDescriptor]) -> Redactor:
        """§8.7 step 1 in the Worker (§13 "Worker redaction"): the process values, and each
        datasource's password, TLS key, host, and every address its pre-dial resolved."""
        secrets = [s for c in connections.values() for s in c.secrets()]
        hosts = [
            h
            for c in connections.values()
            for h in (c.host, c.pinned_address, *c.resolved_addresses)
            if h
        ]
        return self.redactor.with_values(secrets=secrets, hosts=hosts)

    async def _extract_and_complete(
        self,
        job: JobRecord,
        request: ExtractionRequest,
        connections: Mapping[str, ConnectionDescriptor],
        watch: _CancelWatch,
    ) -> str:
        loop = asyncio.get_running_loop()
        key = object_key(job.id, self.key_prefix, job.tenant)
        storage = asyncio.timeout(None)  # §4.3: started once extraction and sizing are done
        recording = False
        try:
            async with storage:
                result, stored = await self._store_result(
                    request,
                    connections,
                    (key, self.keys.for_tenant(job.tenant)),
                    lambda: storage.reschedule(loop.time() + self.storage_timeout),
                )
                recording = watch.recording = True
                return await self._complete(job, key, result, stored)
        except TimeoutError:
            if not storage.expired():
                raise
            if recording:  # §4.3: expiry during step 6
                return await self._fail(job, RECORD_FAILED)
            raise EngineError(
                ErrorCategory.UNAVAILABLE, "failed to store result", detail="timed out"
            ) from None

    async def _store_result(
        self,
        request: ExtractionRequest,
        connections: Mapping[str, ConnectionDescriptor],
        target: tuple[str, KeySet],
        start_storage_clock: Callable[[], None],
    ) -> tuple[ExtractionResult, _Stored]:
        """Plan and execute (§4.3 steps 2-5, one connection per datasource) into the object at
        ``target``'s key, sealed and MACed with its key set (the job's tenant's); the object
        exists only if this returns."""
        key, keys = target
        with span("extract, encrypt and upload") as current:
            result, stored = await self._stream_object(
                request, connections, (key, keys), start_storage_clock
            )
            current.set_attribute("fetcher.object.size_bytes", result.size_bytes)
            current.set_attribute("fetcher.row_count", result.row_count)
        return result, stored

    async def _stream_object(
        self,
        request: ExtractionRequest,
        connections: Mapping[str, ConnectionDescriptor],
        target: tuple[str, KeySet],
        start_storage_clock: Callable[[], None],
    ) -> tuple[ExtractionResult, _Stored]:
        key, keys = target
        async with AsyncExitStack() as stack:

            async def open_writer() -> ObjectWriter:
                return await stack.enter_async_context(self.objects.open_writer(key))

            sink = _EncryptingSink(keys, open_writer, self.b64encode)
            result = await self.engine.run(
                request, connections, sink, on_extracted=start_storage_clock
            )
            result_hmac = await sink.finish()
        return result, _Stored(result_hmac, sink.stored_bytes)

    async def _complete(
        self, job: JobRecord, key: str, result: ExtractionResult, stored: _Stored
    ) -> str:
        """§4.3 step 6: CAS ``processing → completed`` with its outbox row and the result
        summary (§14.1), then the relay."""
        result_hmac = stored.hmac
        now = self.clock.now()
        started_at = job.started_at or job.created_at
        summary = CompletedResult(
            path=key,
            size_bytes=result.size_bytes,
            row_count=result.row_count,
            hmac=result_hmac,
            execution_time_ms=max(0, int((now - started_at).total_seconds() * 1000)),
        )
        event = completed_event(
            self.events, job.id, job.metadata_json, summary, now, tenant=job.tenant
        )
        try:
            with span("record job.completed", attributes={"fetcher.row_count": summary.row_count}):
                done = await self.store.complete_job(
                    job.id,
                    result_path=key,
                    result_hmac=result_hmac,
                    completed_at=now,
                    event=with_trace_context(event),
                    result_summary_json=summary_json(
                        size_bytes=stored.size_bytes,
                        plaintext_bytes=result.size_bytes,
                        row_count=result.row_count,
                        tables=result.table_rows,
                    ),
                    result_key_version=self.key_version,
                )
        except Exception:
            log.exception("recording completion of job %s failed", job.id)
            return await self._fail(job, RECORD_FAILED)
        if not done:
            return await self._discard_unrecorded(job, key)
        self.on_commit()
        log.info("job completed: %d rows stored at %s", result.row_count, key)
        return "completed"

    async def _discard_unrecorded(self, job: JobRecord, key: str) -> str:
        """The completion CAS matched nothing: the job was canceled (§14.4) or reaped while its
        object was being finished. No job points at the object, so it is deleted."""
        try:
            await self.objects.delete(key)
        except Exception:
            log.exception("could not delete the object of job %s at %s", job.id, key)
        status = await self.store.job_status(job.id)
        log.warning("job %s was %s before its completion was recorded", job.id, status)
        return "canceled" if status == "canceled" else "lost"

    async def _fail(self, job: JobRecord, error: str) -> str:
        now = self.clock.now()
        event = failed_event(self.events, job.id, job.metadata_json, error, now, tenant=job.tenant)
        summary = summarise_failure(error)  # §4.5's text stays on the job and its event
        _failure_category.set(summary.category)
        mark_failed(current_span(), summary.message, summary.category)
        with span("record job.failed"):
            done = await self.store.fail_job(
                job.id,
                from_statuses=("processing",),
                error=error,
                completed_at=now,
                event=with_trace_context(event),
            )
        if done:
            self.on_commit()
            log_job_failed(summary)
            return "failed"
        log.warning(
            "job %s was no longer processing when it failed: %s",
            job.id,
            summary.message,
            extra={**LOG_REDACTED, "error_category": summary.category},
        )
        return "lost"


#: The §4.5 category of the failure :meth:`ExtractionService._fail` recorded for the job the
#: current task runs (reset when a run starts). The run is a task of its own (so a cancel can
#: stop it, §14.4), which hands the category back through its ``_CancelWatch``; concurrent
#: jobs never see each other's.
_failure_category: ContextVar[str | None] = ContextVar("fetcher_failure_category", default=None)


def log_job_failed(summary: FailureSummary, job_id: str | None = None) -> None:
    """The one ``job failed`` line (at warning, so level-based alerts see every failure): the
    §4.5 category and the value-free summary, never the failure text itself. ``job_id`` is
    for callers outside the job's bound log context."""
    extra: dict[str, object] = {**LOG_REDACTED, "error_category": summary.category}
    if job_id is not None:
        extra["job_id"] = job_id
    log.warning("job failed: %s", summary.message, extra=extra)
