"""The Worker loop (contract §4.2, §4.4, §8.6, §9.3): consumer, relay and reaper under one
task group.

Deliveries take a permit of the job semaphore (``RABBITMQ_NUMBERS_OF_WORKERS``) before
verification and the claim, and release it when the job ends. On shutdown the consumer stops
at once, in-flight jobs run to their end (each bounded by its own timeout), and the relay
flushes once more before the loop returns.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable

from fetcher.bootstrap import Runtime, WorkerParts
from fetcher.services.infrastructure import Delivery
from fetcher.services.jobs.reaper import ABANDONED
from fetcher.services.jobs.work_handler import WorkHandler
from fetcher.services.jobs.work_messages import work_message_body, work_message_headers

__all__ = ["recover_embedded_jobs", "run_worker", "tune_gc", "work_handler"]

log = logging.getLogger(__name__)

REAP_INTERVAL_SECONDS = 30.0
#: Young-generation threshold of the cyclic collector while the Worker runs (CPython's default
#: is 700 container allocations): extraction allocates a batch's rows and parsed JSON values by
#: the thousand, nearly all freed by reference counting, and the default made the collector
#: traverse (and promote) each live batch many times over (issue 12, docs/performance.md).
GC_YOUNG_THRESHOLD = 50_000


def work_handler(runtime: Runtime) -> WorkHandler:
    """The handler the composition root built for this runtime's Worker side."""
    return _parts(runtime).handler


def _parts(runtime: Runtime) -> WorkerParts:
    if runtime.worker is None:
        raise RuntimeError("this runtime has no worker side")
    return runtime.worker


async def run_worker(runtime: Runtime, stop: asyncio.Event) -> None:
    """Run until ``stop`` is set, then drain as §9.3 describes."""
    parts = _parts(runtime)
    tune_gc()
    handler = work_handler(runtime)
    relay_task = asyncio.create_task(parts.relay.run(), name="outbox-relay")
    reaper_task = asyncio.create_task(
        _every(REAP_INTERVAL_SECONDS, lambda: _reap(parts)), name="stale-reaper"
    )
    consumer = asyncio.create_task(_consume(parts, handler, runtime.settings.workers))
    try:
        await stop.wait()
        await parts.source.stop()
        await consumer  # in-flight jobs finish inside the consumer's task group
        await parts.relay.drain_all()
    finally:
        for task in (consumer, relay_task, reaper_task):
            task.cancel()
        await asyncio.gather(consumer, relay_task, reaper_task, return_exceptions=True)


def tune_gc() -> None:
    """Freeze what start-up built (modules, clients, pools: never garbage, so no collection
    needs to traverse it again) and raise the young generation's threshold (issue 12)."""
    young, middle, old = gc.get_threshold()
    if young >= GC_YOUNG_THRESHOLD:
        return  # once per process
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


async def _consume(parts: WorkerParts, handler: WorkHandler, concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)
    async with asyncio.TaskGroup() as group:
        async for delivery in parts.source.deliveries():
            await gate.acquire()  # §4.2: before verification and the claim
            group.create_task(_handle(handler, delivery, gate))


async def _handle(handler: WorkHandler, delivery: Delivery, gate: asyncio.Semaphore) -> None:
    try:
        await handler.handle(delivery)
    except Exception as exc:  # a bug must not stop the consumer; the reaper ends the job
        log.error("work message handling failed: %s", exc)
    finally:
        gate.release()


async def _reap(parts: WorkerParts) -> None:
    """One reaper tick; the relay publishes its ``job.failed`` rows right after the commit
    (§8.6), like any other terminal transition, instead of at the next repair tick."""
    if await parts.reaper.tick():
        parts.extraction.on_commit()


async def _every(seconds: float, action: Callable[[], Awaitable[object]]) -> None:
    while True:
        try:
            await action()
        except Exception as exc:
            log.warning("periodic task failed: %s", exc)
        await asyncio.sleep(seconds)


async def recover_embedded_jobs(runtime: Runtime) -> None:
    """§4.4 embedded startup: fail every ``processing`` job, re-enqueue every ``pending`` one."""
    parts = _parts(runtime)
    store = runtime.store
    for job in await store.jobs_with_status("processing"):
        await parts.reaper.fail(job, "processing", ABANDONED)
    for job in await store.jobs_with_status("pending"):
        body = work_message_body(job)
        headers = work_message_headers(  # signed for the job's tenant (§12.5)
            runtime.settings.keys.internal_hmac,
            job,
            body,
            routing_key=runtime.jobs.work_queue,
            request_id=job.request_id or "",
        )
        await parts.republisher.publish_work(body, headers)
