"""§13 "Bounded memory", measured on a running process: the RSS of an embedded ``fetcher run``
(SQLite metadata store, local result folder, in-process bus) stays within +15 MiB of its
warmed-up baseline after 500 jobs with large metadata and 1,000 large event-feed reads.

Before the rule, the in-process bus kept every published event (80 such jobs took RSS from
81 to 188 MB) and a feed page held up to 1,000 events. Every job here carries ~125 KiB of
metadata, echoed in its work message and in its event, so a bus that kept its history would
grow by ~60 MiB; every feed read asks for ``limit=1000`` and must get one capped page (§2.12).
RSS is read from ``/proc/<pid>/status`` (``VmRSS``); a warm-up with the same workload comes
before the baseline so allocator pools and caches are already at their working size.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from fetcher.cli.demo_data import build_sample_database
from tests.e2e.conftest import E2E
from tests.e2e.harness import embedded_fetcher, eventually
from tests.processes import status_kib

pytestmark = E2E

MIB = 1024 * 1024
#: §13: the bound this test proves.
RSS_BOUND = 15 * MIB
#: §2.12: the page byte cap.
PAGE_BYTES = 4 * MIB
CONNECTION = "mem_ledger"
#: 64 keys x 2,000 characters (the §2.5 value limit): ~125 KiB of metadata per job.
PAD = {f"pad{n:02d}": secrets.token_hex(1000) for n in range(64)}
SUBMITTERS = 8
READERS = 3


def vm_rss(pid: int) -> int:
    """``VmRSS`` of ``pid`` in bytes, from ``/proc/<pid>/status``."""
    return status_kib(pid, "VmRSS") * 1024


@pytest_asyncio.fixture(loop_scope="session")
async def embedded(tmp_path: Path) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """An embedded ``fetcher run`` without a broker, with the demo ledger registered."""
    if not sys.platform.startswith("linux"):
        pytest.skip("VmRSS comes from /proc")
    samples = tmp_path / "samples"
    samples.mkdir()
    build_sample_database(samples / "ledger.db")
    async with (
        embedded_fetcher(tmp_path, SQLITE_ALLOWED_DIR=str(samples)) as process,
        httpx.AsyncClient(base_url=process.base_url, timeout=30.0) as client,
    ):
        created = await client.post(
            "/v1/management/connections",
            headers={"X-Product-Name": "payments"},
            json={
                "configName": CONNECTION,
                "type": "SQLITE",
                "databaseName": str(samples / "ledger.db"),
            },
        )
        assert created.status_code == 201, created.text
        yield process, client


async def _one_job(client: httpx.AsyncClient, n: int) -> str:
    metadata = {"source": "payments", "correlationId": f"mem-{n}-{secrets.token_hex(4)}", **PAD}
    body = {
        "dataRequest": {"mappedFields": {CONNECTION: {"accounts": ["*"]}}},
        "metadata": metadata,
    }
    response = await client.post("/v1/fetcher", json=body)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["jobId"]

    async def done() -> str | None:
        job = (await client.get(f"/v1/fetcher/{job_id}")).json()
        return str(job["status"]) if job["status"] in ("completed", "failed") else None

    assert await eventually(done, f"job {job_id}", within=60.0, interval=0.05) == "completed"
    return job_id


async def run_jobs(client: httpx.AsyncClient, count: int) -> None:
    """``count`` jobs, ``SUBMITTERS`` at a time, each waited for until it completed."""
    numbers = iter(range(count))

    async def submitter() -> None:
        for n in numbers:
            await _one_job(client, n)

    await asyncio.gather(*(submitter() for _ in range(SUBMITTERS)))


async def read_feed(client: httpx.AsyncClient, count: int) -> int:
    """``count`` reads of ``limit=1000`` pages at varying cursors; returns the largest page."""
    starts = itertools.cycle(range(0, 40, 3))
    reads = iter(range(count))
    largest = 0

    async def reader() -> None:
        nonlocal largest
        for _ in reads:
            response = await client.get("/v1/events", params={"after": next(starts), "limit": 1000})
            assert response.status_code == 200, response.text[:200]
            sizes = [_data_bytes(item) for item in json.loads(response.content)["items"]]
            assert sum(sizes[:-1]) <= PAGE_BYTES < sum(sizes), sizes  # §2.12 page size
            largest = max(largest, len(response.content))

    await asyncio.gather(*(reader() for _ in range(READERS)))
    return largest


def _data_bytes(item: dict[str, Any]) -> int:
    """The byte length of an item's ``data`` (the stored body is compact UTF-8 JSON)."""
    return len(json.dumps(item["data"], ensure_ascii=False, separators=(",", ":")).encode())


async def workload(client: httpx.AsyncClient, jobs: int, reads: int) -> int:
    """Jobs and feed reads at the same time, as a busy embedded deployment sees them."""
    _, largest = await asyncio.gather(run_jobs(client, jobs), read_feed(client, reads))
    return largest


async def settled_rss(pid: int) -> int:
    """RSS after in-flight work has drained (the smallest of a few samples)."""
    samples = []
    for _ in range(5):
        await asyncio.sleep(0.4)
        samples.append(vm_rss(pid))
    return min(samples)


async def test_rss_stays_flat_after_500_jobs_and_1000_large_feed_reads(
    embedded: tuple[Any, httpx.AsyncClient],
) -> None:
    process, client = embedded
    # Every read starts at a cursor below 40 (``read_feed``), and a capped page needs about 33
    # events of ~126 KiB after it: 80 events first, so every page must reach the cap.
    await run_jobs(client, 80)
    await workload(client, jobs=100, reads=200)  # warm-up: the same mix, not measured
    baseline = await settled_rss(process.pid)

    largest = await workload(client, jobs=500, reads=1000)
    after = await settled_rss(process.pid)

    grown = after - baseline
    print(
        f"VmRSS baseline {baseline / MIB:.1f} MiB, after {after / MIB:.1f} MiB, "
        f"grown {grown / MIB:+.1f} MiB; largest page {largest / MIB:.2f} MiB"
    )
    assert largest > 3 * MIB, "the reads must be large pages for the test to mean anything"
    assert largest < PAGE_BYTES + MIB
    assert grown <= RSS_BOUND, f"RSS grew by {grown / MIB:.1f} MiB (bound 15 MiB)"
