"""Rotating ``APP_ENC_KEY`` across a fleet while jobs run (docs/key-rotation.md, contract §14.3).

One Manager and two Workers (real ``fetcher run`` processes) on PostgreSQL, RabbitMQ and S3;
small jobs are submitted continuously while the runbook is followed one process at a time:
each Worker is restarted with the new key (``APP_ENC_KEY`` = new, ``APP_ENC_KEY_VERSION=2``,
``APP_ENC_KEY_PREVIOUS=1:<old>``), then the Manager (a rotated Manager is started before the
old one is stopped, as a rolling update with surge does, so submissions never pause), then
``fetcher rotate-credentials`` runs. At the end:

* every submitted job completed (none failed, none stuck);
* both key versions occur, and every result object downloads through the rotated Manager's
  route and verifies (GCM tag with the storage key, HMAC with the external key) with the keys
  ``fetcher derive-key --version <v>`` prints for its ``X-Fetcher-Key-Version``;
* every job event on a queue bound to the events exchange verifies (§8.5) with the external
  key of its job's key version (the completing Worker's relay signs with the key that sealed
  the object);
* every stored credential is under version 2.

The stack has its own metadata database, queues, exchange and bucket (tests/chaos/stack.py,
direct: no fault proxies in the path), so the rotated credentials touch no other test.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path
from typing import Any

import httpx

from tests.chaos.stack import ChaosStack, chaos_stack
from tests.e2e.conftest import E2E
from tests.e2e.harness import (
    FetcherProcess,
    ManagerApi,
    ReceivedEvent,
    decrypt_result_object,
    eventually,
    hmac_hex,
    rotated_env,
    run_fetcher,
    signing_input,
)

pytestmark = E2E

CONFIG = "rot_src"
MAPPED = {CONFIG: {"public.items": ["id", "name"]}}
#: Seconds between two submissions (about three jobs a second).
SUBMIT_EVERY = 0.3
#: Seconds of submissions before the first and after every rotation step.
SETTLE = 3.0


async def version_keys(rotated: dict[str, str], version: str) -> tuple[bytes, bytes]:
    """``(external, storage)`` of a key version, as a consumer gets them: ``fetcher derive-key
    --version <v>`` with the rotated variables (the runbook's §5)."""
    env = {"PATH": os.environ.get("PATH", ""), **rotated}
    keys = []
    for purpose in ("external", "storage"):
        code, out, err = await run_fetcher(
            env, "derive-key", "--version", version, "--purpose", purpose, seconds=60
        )
        assert code == 0, err.decode()
        keys.append(bytes.fromhex(out.decode().rsplit(" ", 1)[1].strip()))
    return keys[0], keys[1]


class Submitter:
    """Submits a small job every :data:`SUBMIT_EVERY` seconds to the current Manager until
    stopped; ``api`` is switched to the rotated Manager before the old one stops."""

    def __init__(self, api: ManagerApi) -> None:
        self.api = api
        self.job_ids: list[str] = []
        self.stopped = asyncio.Event()

    async def run(self) -> None:
        while not self.stopped.is_set():
            self.job_ids.append(await self.api.submit(MAPPED))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopped.wait(), SUBMIT_EVERY)

    async def settle(self, more: int = 3) -> None:
        """Let at least ``more`` further jobs be submitted (the fleet keeps working between
        steps)."""
        target = len(self.job_ids) + more

        async def submitted() -> bool | None:
            return True if len(self.job_ids) >= target else None

        await eventually(submitted, f"{more} more submissions")
        await asyncio.sleep(SETTLE / 2)


async def restart_worker(stack: ChaosStack, old: FetcherProcess, env: dict[str, str]) -> None:
    """Stop a Worker (SIGTERM drains it, §9.3: it must exit 0) and start it with ``env``."""
    assert await old.terminate() == 0, old.log_tail()
    stack.workers.remove(old)
    stack.workers.append(await stack.launcher.worker(**env))


def event_key_version(event: ReceivedEvent, exchange: str, keys: dict[str, bytes]) -> str:
    """The version whose external key verifies the §8.5 signature (fails when none does)."""
    headers = event.headers
    signed = signing_input(
        str(headers["t"]), exchange=exchange, routing_key=event.routing_key, body=event.body
    )
    matching = [
        v for v, key in keys.items() if hmac_hex(key, signed) == headers["x-message-signature"]
    ]
    assert len(matching) == 1, f"event of job {event.job_id} verifies with {matching}"
    return matching[0]


async def test_rotating_the_master_key_one_process_at_a_time_while_jobs_run(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    new_key = base64.b64encode(secrets.token_bytes(32)).decode()
    rotated = rotated_env(new_key)
    async with chaos_stack(tmp_path, workers=2, direct=True) as stack:
        await stack.api.create_connection(
            CONFIG,
            stack.source.name,
            password=f"rot-{secrets.token_hex(6)}",
            host=stack.source.host,
            port=stack.source.port,
        )
        submitter = Submitter(stack.api)
        submitting = asyncio.create_task(submitter.run())
        try:
            await submitter.settle()
            # §2 of the runbook: the Workers, one at a time.
            for old in list(stack.workers):
                await restart_worker(stack, old, rotated)
                await submitter.settle()
            # §3: the Manager; the rotated one serves before the old one drains.
            manager = await stack.launcher.manager(**rotated)
            old_manager = stack.manager
            submitter.api = ManagerApi(stack.launcher.http, manager.base_url)
            assert await old_manager.terminate() == 0, old_manager.log_tail()
            await submitter.settle()
            # §4: re-encrypt the stored credentials while jobs still run.
            base = {**stack.launcher.base_env, "FETCHER_MODE": "manager", **rotated}
            code, out, err = await run_fetcher(base, "rotate-credentials", seconds=60)
            assert code == 0, err.decode()
            assert out.startswith(b"re-encrypted 1 connections;"), out
            assert out.endswith(b"; 0 failed\n"), out
            await submitter.settle()
        finally:
            submitter.stopped.set()
            await submitting
        api = submitter.api
        jobs = [await api.wait_terminal(job_id, within=60) for job_id in submitter.job_ids]
        failed = [j for j in jobs if j["status"] != "completed"]
        assert not failed, failed
        versions = {j["result"]["keyVersion"] for j in jobs}
        assert versions == {"1", "2"}, versions

        keys = {v: await version_keys(rotated, v) for v in ("1", "2")}
        for job in jobs:
            await assert_download_verifies(stack, api, job, keys)

        external = {v: pair[0] for v, pair in keys.items()}
        collector = stack.broker.collector

        async def every_event() -> bool | None:
            return True if all(collector.for_job(j["id"]) for j in jobs) else None

        await eventually(every_event, "a job.completed event of every job")
        exchange = stack.broker.names.events_exchange
        signed_with = set()
        for job in jobs:
            for event in collector.for_job(job["id"]):
                assert event.routing_key == "job.completed"
                version = event_key_version(event, exchange, external)
                assert version == job["result"]["keyVersion"], (job["id"], version)
                signed_with.add(version)
        assert signed_with == {"1", "2"}

        stored = stack.metadata.records("SELECT encryption_key_version FROM connections")
        assert {r["encryption_key_version"] for r in stored} == {"2"}, stored
        for process in stack.launcher.started:
            stack.launcher.assert_no_secrets(process)
        assert new_key not in "".join(p.logs() for p in stack.launcher.started)
    elapsed = time.monotonic() - started
    print(f"fleet rotation: {len(jobs)} jobs, versions {sorted(versions)}, {elapsed:.1f}s")


async def assert_download_verifies(
    stack: ChaosStack, api: ManagerApi, job: dict[str, Any], keys: dict[str, tuple[bytes, bytes]]
) -> None:
    """The route's bytes are the stored object and open with the keys of its version."""
    response: httpx.Response = await stack.launcher.http.get(
        f"{api.base_url}/v1/fetcher/{job['id']}/result"
    )
    assert response.status_code == 200, response.text
    version = response.headers["x-fetcher-key-version"]
    assert version == job["result"]["keyVersion"]
    assert response.content == stack.results.read(job["resultPath"])
    external, storage = keys[version]
    plain = decrypt_result_object(storage, response.content)  # the GCM tag
    digest = hmac.new(external, plain, hashlib.sha256).hexdigest()
    assert digest == response.headers["x-fetcher-result-hmac"] == job["resultHmac"]
