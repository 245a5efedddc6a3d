"""Embedded mode's batch encoder process (issue 12) lives and dies with its host.

``fetcher run`` in embedded mode starts a second process for batch encoding (multiprocessing's
``spawn``) when its first PostgreSQL job streams, which brings a resource tracker along: two
processes under the host; none before (a host with other sources never starts them). Whether the
host drains on SIGTERM or is killed outright (SIGKILL: the OOM killer, a container stop past
its grace period), neither may outlive it. Before the fix a SIGKILLed host left both running
for ever: the child waited on a queue whose write end it held itself, and the tracker waited
for it.
"""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import suppress
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import E2E
from tests.e2e.harness import (
    DatabaseFactory,
    FetcherProcess,
    ManagerApi,
    embedded_fetcher,
    eventually,
)
from tests.processes import alive, command_line, descendants

pytestmark = E2E

LEDGER_SQL = """
CREATE TABLE public.ledger AS
SELECT n AS id, jsonb_build_object('n', n, 'x', n * 1.5) AS doc, ARRAY[n * 0.5::float8] AS f
FROM generate_series(1, 5000) AS n;
"""
#: ``f`` (an array) keeps the job on the general path, whose batches the child encodes: the
#: PostgreSQL fast path (issue 23) covers no arrays and never starts the child.


async def _encoder_processes(host: FetcherProcess) -> set[int]:
    """The host's helper processes, once the encoder has started in the background."""

    async def started() -> set[int] | None:
        found = descendants(host.pid)
        return found if len(found) >= 2 else None

    return await eventually(started, "the encoder process and the resource tracker", within=30)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
async def test_no_encoder_process_outlives_its_host(
    tmp_path: Path, sig: signal.Signals, databases: DatabaseFactory
) -> None:
    source = databases.create("fetcher_encoder_e2e", LEDGER_SQL)
    async with embedded_fetcher(tmp_path) as host, httpx.AsyncClient(timeout=30) as http:
        assert descendants(host.pid) == set()  # nothing until a PostgreSQL job streams
        api = ManagerApi(http, host.base_url)
        await api.create_connection(
            "ledger_pg", source.name, password="unused", host=source.host, port=source.port
        )
        job_id = await api.submit({"ledger_pg": {"public.ledger": ["id", "doc", "f"]}})
        assert (await api.wait_terminal(job_id))["status"] == "completed"
        helpers = await _encoder_processes(host)
        commands = [command_line(pid) for pid in helpers]
        assert all(b"multiprocessing" in command for command in commands), commands
        os.kill(host.pid, sig)
        assert await host.wait_exit(30) is not None
        for _ in range(100):
            if not any(alive(pid) for pid in helpers):
                break
            await asyncio.sleep(0.1)
        survivors = [pid for pid in helpers if alive(pid)]
        for pid in survivors:  # leave nothing behind, then fail
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        assert survivors == [], f"still running 10 s after the host's {sig.name}: {survivors}"
