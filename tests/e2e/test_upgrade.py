"""Upgrading a metadata store the previous release wrote (issue 36 item 4, §15.4).

The store gets the previous release's migrations only and rows in every state, written by
SQL in that schema's shape (:mod:`tests.previous_release`). This release then upgrades it,
by a process start (Manager; embedded on SQLite) or first by ``fetcher migrate``, and the
running processes must still serve every job and connection and deliver every pending event:

* PostgreSQL (Manager + Worker): the jobs read back as written; the live connections
  are listed and the soft-deleted one stays gone; the unpublished ``job.failed`` row is
  published to the events exchange and joins the feed; the stale ``pending`` and
  ``processing`` jobs are reaped per §4.4 with their events; the ``pending`` job whose work
  message the previous release queued is processed; a new job on the old stored
  connection completes (its password, encrypted by the previous release, still decrypts).
* SQLite (embedded): at start the ``processing`` job is failed and the ``pending`` ones
  re-enqueued (§4.4) and processed with the old stored connection; the unpublished event is
  delivered to the feed.
"""

from __future__ import annotations

import asyncio
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from fetcher.adapters.store._common import load_migrations
from tests.e2e.conftest import E2E
from tests.e2e.harness import (
    FETCHER_BIN,
    MASTER_KEY,
    PENDING_TIMEOUT_SECONDS,
    Broker,
    DatabaseFactory,
    ManagerApi,
    ProcessLauncher,
    RawMessage,
    embedded_fetcher,
    eventually,
    publish_work,
)
from tests.previous_release import (
    OLD_FAILURE,
    PRODUCT,
    OldRows,
    added_migrations,
    work_message,
    write_postgres,
    write_sqlite,
)

pytestmark = E2E

ABANDONED = "extraction abandoned: worker stopped before completion"
NOT_PROCESSED = "work message was not processed"


def fetcher_migrate(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own console script, fixed argv
        [FETCHER_BIN, "migrate", *args],
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def migrate_separately(database_url: str, backend: str) -> None:
    """``--check`` names exactly this release's migrations (exit 3 when there are any), the
    migrate applies them and exits 0, and a second ``--check`` finds nothing pending."""
    added = added_migrations(backend)
    check = fetcher_migrate(database_url, "--check")
    assert check.returncode == (3 if added else 0), check.stdout + check.stderr
    assert [line.split()[1] for line in check.stdout.splitlines()[:-1]] == added
    done = fetcher_migrate(database_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[1] for line in done.stdout.splitlines()[:-1]] == added
    again = fetcher_migrate(database_url, "--dry-run")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.endswith("(up to date)\n")


async def status_of(api: ManagerApi, job_id: str) -> str:
    return str((await api.job(job_id))["status"])


async def assert_connections_served(http: httpx.AsyncClient, base: str, old: OldRows) -> None:
    headers = {"X-Product-Name": PRODUCT}
    for cid in old.live_connections:
        response = await http.get(f"{base}/v1/management/connections/{cid}", headers=headers)
        assert response.status_code == 200, response.text
        assert old.password not in response.text
    gone = await http.get(
        f"{base}/v1/management/connections/{old.deleted_connection}", headers=headers
    )
    assert gone.status_code == 404, gone.text
    listed = await http.get(f"{base}/v1/management/connections", headers=headers)
    assert listed.status_code == 200, listed.text
    assert {c["id"] for c in listed.json()["items"]} == old.live_connections


async def feed_job_events(http: httpx.AsyncClient, base: str) -> dict[str, list[str]]:
    """Every feed item's routing keys by job (one page holds them all here)."""
    response = await http.get(f"{base}/v1/events", params={"after": "0", "limit": 1000})
    assert response.status_code == 200, response.text
    found: dict[str, list[str]] = {}
    for item in response.json()["items"]:
        found.setdefault(item["data"]["job_id"], []).append(item["routingKey"])
    return found


@pytest.mark.parametrize("upgrade_by", ["manager start", "fetcher migrate"])
async def test_a_postgres_store_of_the_previous_release_is_served_after_the_upgrade(
    upgrade_by: str,
    databases: DatabaseFactory,
    launcher: ProcessLauncher,
    broker: Broker,
    source_db: Any,
) -> None:
    http = launcher.http
    database = databases.create("fetcher_upgrade")
    old = write_postgres(
        database.conninfo,
        master_key=MASTER_KEY,
        source_host=source_db.host,
        source_port=source_db.port,
        source_database=source_db.name,
        pending_age=timedelta(seconds=PENDING_TIMEOUT_SECONDS + 60),
        processing_age=timedelta(hours=1),
    )
    if upgrade_by == "fetcher migrate":
        await asyncio.to_thread(migrate_separately, database.url, "postgres")
    manager = await launcher.manager(DATABASE_URL=database.url)
    api = ManagerApi(http, manager.base_url)
    # The previous release's Manager queued this job's work message before the upgrade; the
    # durable queue keeps it (published now: the queue exists once a Manager declared it).
    body, headers = work_message(old, master_key=MASTER_KEY, work_queue=broker.names.work_queue)
    async with broker.channel() as channel:
        await publish_work(channel, broker.names.work_queue, RawMessage(body, headers))
    expected = {
        old.pending: "pending",
        old.queued: "pending",
        old.processing: "processing",
        old.completed: "completed",
        old.failed: "failed",
    }
    assert {job: await status_of(api, job) for job in expected} == expected
    assert (await api.job(old.failed))["metadata"]["error"] == OLD_FAILURE
    assert (await api.job(old.completed))["resultPath"] == f"external-data/{old.completed}.json"
    await assert_connections_served(http, manager.base_url, old)
    ledger = database.records("SELECT version FROM schema_migrations ORDER BY version")
    assert len(ledger) == len({row["version"] for row in ledger})  # each applied once

    async with launcher.running_worker(DATABASE_URL=database.url):
        published = await broker.collector.wait_for(old.failed, "job.failed")
        assert published.payload["metadata"]["error"] == {"message": OLD_FAILURE}
        for job_id, error in ((old.pending, NOT_PROCESSED), (old.processing, ABANDONED)):
            reaped = await api.wait_terminal(job_id)
            assert (reaped["status"], reaped["metadata"]["error"]) == ("failed", error)
            await broker.collector.wait_for(job_id, "job.failed")
        queued = await api.wait_terminal(old.queued)
        assert queued["status"] == "completed", queued
        await broker.collector.wait_for(old.queued, "job.completed")
        fresh = await api.submit({"pg_src": {"public.accounts": ["id"]}})
        done = await api.wait_terminal(fresh)
        assert done["status"] == "completed", done
    assert not broker.collector.for_job(old.completed)  # published before: not again

    feed = await feed_job_events(http, manager.base_url)
    assert feed[old.completed] == ["job.completed"]
    assert feed[old.failed] == ["job.failed"]
    assert feed[old.pending] == feed[old.processing] == ["job.failed"]
    assert feed[old.queued] == ["job.completed"]


@pytest.mark.parametrize("upgrade_by", ["embedded start", "fetcher migrate"])
async def test_a_sqlite_store_of_the_previous_release_is_served_after_the_upgrade(
    upgrade_by: str, source_db: Any, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    store = tmp_path / "state" / "meta.db"
    old = write_sqlite(
        store,
        master_key=MASTER_KEY,
        source_host=source_db.host,
        source_port=source_db.port,
        source_database=source_db.name,
        pending_age=timedelta(seconds=30),
        processing_age=timedelta(minutes=5),
    )
    if upgrade_by == "fetcher migrate":
        await asyncio.to_thread(migrate_separately, f"sqlite:///{store}", "sqlite")
    async with embedded_fetcher(tmp_path) as embedded:
        api = ManagerApi(http, embedded.base_url)
        for job_id in (old.pending, old.queued):
            processed = await api.wait_terminal(job_id)
            assert processed["status"] == "completed", processed
        abandoned = await api.job(old.processing)
        assert (abandoned["status"], abandoned["metadata"]["error"]) == ("failed", ABANDONED)
        assert await status_of(api, old.completed) == "completed"
        failed = await api.job(old.failed)
        assert (failed["status"], failed["metadata"]["error"]) == ("failed", OLD_FAILURE)
        await assert_connections_served(http, embedded.base_url, old)

        async def delivered() -> dict[str, list[str]] | None:
            feed = await feed_job_events(http, embedded.base_url)
            return feed if len(feed) == 5 else None

        feed = await eventually(delivered, "the five jobs' events in the feed")
        assert feed == {
            old.completed: ["job.completed"],
            old.failed: ["job.failed"],
            old.pending: ["job.completed"],
            old.queued: ["job.completed"],
            old.processing: ["job.failed"],
        }


async def test_fetcher_migrate_and_a_starting_manager_do_not_race(
    databases: DatabaseFactory, launcher: ProcessLauncher
) -> None:
    """Both run the one migration transaction behind the one lock: whichever comes second
    finds nothing to do, both succeed, and every version is recorded once."""
    database = databases.create("fetcher_race")
    manager = launcher.start_manager(DATABASE_URL=database.url)
    done = await asyncio.to_thread(fetcher_migrate, database.url)
    await manager.wait_healthy(launcher.http)
    assert done.returncode == 0, done.stdout + done.stderr
    versions = [r["version"] for r in database.records("SELECT version FROM schema_migrations")]
    assert sorted(versions) == [m.version for m in load_migrations("postgres")]
