"""§13 "Files", after a real embedded run: the SQLite metadata store, its ``-wal`` and ``-shm``
files and the local result objects are mode 0600, the directories the process created for them
0700, and a directory that already existed keeps its mode.

The process runs with umask 000, so any file or directory whose mode is left to the defaults
would come out world-readable (0644/0666, 0755/0777) and fail here.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from fetcher.cli.demo_data import build_sample_database
from tests.e2e.conftest import E2E
from tests.e2e.harness import MASTER_KEY, FetcherProcess, ProcessLauncher, eventually

pytestmark = E2E

CONNECTION = "modes_ledger"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest_asyncio.fixture(loop_scope="session")
async def launcher(tmp_path: Path) -> AsyncIterator[ProcessLauncher]:
    logs = tmp_path / "logs"
    logs.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "APP_ENC_KEY": MASTER_KEY,
        "READYZ_DRAIN_DELAY_SEC": "0",
        "LOG_LEVEL": "warn",
    }
    async with httpx.AsyncClient(timeout=30.0) as http:
        started = ProcessLauncher(env, logs, http, secrets=(MASTER_KEY,))
        try:
            yield started
        finally:
            await started.stop_all()


async def _start_with_umask_000(launcher: ProcessLauncher, **env: str) -> FetcherProcess:
    """``fetcher run`` inherits the umask at fork; restored at once for this test process."""
    previous = os.umask(0)
    try:
        process = launcher.start_manager(**env)
    finally:
        os.umask(previous)
    await process.wait_healthy(launcher.http)
    return process


async def _completed_job(client: httpx.AsyncClient, database: Path) -> dict[str, object]:
    created = await client.post(
        "/v1/management/connections",
        headers={"X-Product-Name": "payments"},
        json={"configName": CONNECTION, "type": "SQLITE", "databaseName": str(database)},
    )
    assert created.status_code == 201, created.text
    body = {
        "dataRequest": {"mappedFields": {CONNECTION: {"accounts": ["*"], "ledger": ["id"]}}},
        "metadata": {"source": "payments"},
    }
    accepted = await client.post("/v1/fetcher", json=body)
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["jobId"]

    async def done() -> dict[str, object] | None:
        job: dict[str, object] = (await client.get(f"/v1/fetcher/{job_id}")).json()
        return job if job["status"] in ("completed", "failed") else None

    return await eventually(done, f"job {job_id}")


async def test_metadata_store_and_result_objects_are_private(
    launcher: ProcessLauncher, tmp_path: Path
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("POSIX modes")
    samples = tmp_path / "samples"
    samples.mkdir()
    build_sample_database(samples / "ledger.db")
    existing = tmp_path / "existing"
    existing.mkdir()
    existing.chmod(0o755)
    state = existing / "state"
    database, objects = state / "db" / "meta.db", state / "objects"
    process = await _start_with_umask_000(
        launcher,
        FETCHER_MODE="embedded",
        DATABASE_URL=f"sqlite:///{database}",
        OBJECT_STORAGE_LOCAL_DIR=str(objects),
        SQLITE_ALLOWED_DIR=str(samples),
    )
    async with httpx.AsyncClient(base_url=process.base_url, timeout=30.0) as client:
        job = await _completed_job(client, samples / "ledger.db")
        assert job["status"] == "completed", job
        result = objects / str(job["resultPath"])
        # Stat while the process runs: the -wal and -shm files exist only while it is open.
        files = [database, Path(f"{database}-wal"), Path(f"{database}-shm"), result]
        assert {str(f): oct(_mode(f)) for f in files} == {str(f): "0o600" for f in files}
        stored = [p for p in objects.rglob("*") if p.is_file()]
        assert stored == [result]
        made = [state, database.parent, objects, *(p for p in objects.rglob("*") if p.is_dir())]
        assert len(made) >= 4
        assert {str(d): oct(_mode(d)) for d in made} == {str(d): "0o700" for d in made}
        assert _mode(existing) == 0o755, "an existing directory keeps its mode"
    assert await process.terminate() == 0
