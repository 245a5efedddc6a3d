"""The backup and restore runbook of docs/upgrades.md, rehearsed with its own commands.

A job completes on the session stack. Then, in the runbook's order: ``pg_dump`` the metadata
database (custom format), copy the result bucket with ``aws s3 sync``, ``createdb`` a fresh
database and ``pg_restore`` into it. A Manager started on the restored database serves the
job as before, ``fetcher migrate --check`` finds the schema current, and ``fetcher result
get`` downloads the job's result from the copied bucket and verifies it (GCM tag, HMAC).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    FETCHER_BIN,
    MASTER_KEY,
    Database,
    DatabaseFactory,
    ManagerApi,
    Stack,
    decrypt_result_object,
    embedded_fetcher,
)
from tests.services import S3_ACCESS_KEY, S3_ENDPOINT, S3_SECRET_KEY, fresh_bucket

pytestmark = E2E


def shell(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[bytes]:
    """One runbook command; it must succeed."""
    done = subprocess.run(  # noqa: S603 - fixed tools, arguments from the test
        list(argv), env={"PATH": os.environ.get("PATH", ""), **env}, capture_output=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done


async def test_a_restored_database_and_bucket_serve_the_job_and_its_result(
    stack: Stack, databases: DatabaseFactory, metadata_db: Database, s3: Any, tmp_path: Path
) -> None:
    async with stack.launcher.running_worker():
        job_id = await stack.api.submit({SOURCE_CONFIG: {"public.accounts": ["id", "email"]}})
        before = await stack.api.wait_terminal(job_id)
    assert before["status"] == "completed", before

    dump = tmp_path / "fetcher-meta.dump"
    restored = databases.reserve("fetcher_restored")
    pg = {"PGHOST": metadata_db.host, "PGPORT": str(metadata_db.port), "PGUSER": "postgres"}
    aws = {
        "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    with fresh_bucket(s3, "fetcher-restore") as copy:
        # The runbook, in its order: the database first, then the objects it references.
        await asyncio.to_thread(
            shell,
            ["pg_dump", "--format=custom", "--no-owner", f"--file={dump}", metadata_db.url],
            pg,
        )
        await asyncio.to_thread(
            shell,
            ["aws", "--endpoint-url", S3_ENDPOINT, "s3", "sync",
             f"s3://{stack.results.bucket}", f"s3://{copy}"],
            aws,
        )  # fmt: skip
        await asyncio.to_thread(shell, ["createdb", restored.name], pg)
        await asyncio.to_thread(
            shell, ["pg_restore", "--no-owner", f"--dbname={restored.url}", str(dump)], pg
        )
        check = await asyncio.to_thread(
            shell, [FETCHER_BIN, "migrate", "--check"], {"DATABASE_URL": restored.url}
        )
        assert check.stdout.endswith(b"(up to date)\n")

        manager = await stack.launcher.manager(DATABASE_URL=restored.url)
        after = await ManagerApi(stack.launcher.http, manager.base_url).job(job_id)
        assert after == before
        target = tmp_path / "result.json"
        await asyncio.to_thread(
            shell,
            [FETCHER_BIN, "result", "get", job_id, "--api", manager.base_url, "-o", str(target)],
            {
                "APP_ENC_KEY": stack.launcher.base_env["APP_ENC_KEY"],
                "OBJECT_STORAGE_BUCKET": copy,
                "OBJECT_STORAGE_ENDPOINT": S3_ENDPOINT,
                "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS_KEY,
                "OBJECT_STORAGE_SECRET_KEY": S3_SECRET_KEY,
                "OBJECT_STORAGE_USE_PATH_STYLE": "true",
            },
        )
        original = stack.results.read(before["resultPath"])
        assert target.read_bytes() == decrypt_result_object(stack.keys.storage, original)
        await manager.terminate()


async def test_a_restored_sqlite_store_and_object_folder_serve_the_job_and_its_result(
    source_db: Database, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    """Embedded mode's runbook: ``sqlite3 .backup`` (safe while the process runs) and a copy
    of the object folder, restored into a new state folder that a new process starts on."""
    live, backup, restored = tmp_path / "live", tmp_path / "backup", tmp_path / "restored"
    async with embedded_fetcher(live) as embedded:
        api = ManagerApi(http, embedded.base_url)
        await api.create_connection(
            SOURCE_CONFIG, source_db.name, password="x", host=source_db.host, port=source_db.port
        )
        job_id = await api.submit({SOURCE_CONFIG: {"public.accounts": ["id", "email"]}})
        before = await api.wait_terminal(job_id)
        assert before["status"] == "completed", before
        backup.mkdir(mode=0o700)
        await asyncio.to_thread(
            shell, ["sqlite3", str(live / "state" / "meta.db"), f".backup '{backup}/meta.db'"], {}
        )
        await asyncio.to_thread(shell, ["chmod", "600", f"{backup}/meta.db"], {})
        await asyncio.to_thread(
            shell, ["cp", "-a", str(live / "state" / "objects"), f"{backup}/objects"], {}
        )
    (restored / "state").mkdir(mode=0o700, parents=True)
    await asyncio.to_thread(shell, ["cp", "-a", f"{backup}/.", str(restored / "state")], {})
    assert (restored / "state" / "meta.db").stat().st_mode & 0o777 == 0o600  # §13 "Files"
    async with embedded_fetcher(restored) as embedded:
        after = await ManagerApi(http, embedded.base_url).job(job_id)
        assert after == before
        target = tmp_path / "result.json"
        await asyncio.to_thread(
            shell,
            [FETCHER_BIN, "result", "get", job_id, "--api", embedded.base_url, "-o", str(target)],
            {
                "APP_ENC_KEY": MASTER_KEY,
                "OBJECT_STORAGE_LOCAL_DIR": str(restored / "state/objects"),
            },
        )
        document = json.loads(target.read_bytes())
        assert sorted(r["id"] for r in document[SOURCE_CONFIG]["accounts"]) == [1, 2, 3, 4, 5, 6]
