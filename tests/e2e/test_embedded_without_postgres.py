"""Embedded mode needs no PostgreSQL driver (issue 20): the ``postgres`` extra is optional.

A fresh interpreter blocks ``psycopg`` and ``psycopg_pool`` with a ``sys.meta_path`` finder
that raises ``ImportError`` before anything of Fetcher is imported, then imports
``fetcher.bootstrap``, starts embedded mode on SQLite exactly as ``fetcher run`` does
(``fetcher.cli.run.running``), answers ``/health`` through the Manager application, and runs
one job against an internal SQLite datasource to ``completed``. It fails when bootstrap (or
anything embedded mode loads) imports the PostgreSQL store or connector eagerly.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.e2e.harness import MASTER_KEY

_SCRIPT = r"""
import asyncio
import importlib.abc
import json
import sys

BLOCKED = ("psycopg", "psycopg_pool")


class NoPostgresDriver(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: embedded mode must not import it")
        return None


sys.meta_path.insert(0, NoPostgresDriver())

import httpx

import fetcher.bootstrap
from fetcher.cli.run import running
from fetcher.manager.app import create_app
from fetcher.settings import Settings

JOB = {
    "dataRequest": {"mappedFields": {"local_src": {"accounts": ["id", "name"]}}},
    "metadata": {"source": "payments"},
}


async def main() -> dict[str, object]:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        blocked = True
    else:
        blocked = False
    settings = Settings.from_env()
    async with running(settings, sockets=[]) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            health = await client.get("/health")
            created = await client.post("/v1/fetcher", json=JOB)
            job_id = created.json()["jobId"]
            for _ in range(300):
                job = (await client.get(f"/v1/fetcher/{job_id}")).json()
                if job["status"] in ("completed", "failed"):
                    break
                await asyncio.sleep(0.05)
    return {
        "blocked": blocked,
        "health": [health.status_code, health.json()],
        "created": created.status_code,
        "job": [job["status"], job.get("metadata", {}).get("error")],
        "result_path": bool(job.get("resultPath")),
        "drivers": sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED),
        "store": type(runtime.store).__name__,
    }


print(json.dumps(asyncio.run(main())))
"""


def test_embedded_mode_runs_a_job_with_the_postgres_driver_blocked(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    with contextlib.closing(sqlite3.connect(source)) as db:
        db.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO accounts VALUES (1, 'ada'), (2, 'grace')")
        db.commit()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "FETCHER_MODE": "embedded",
        "APP_ENC_KEY": MASTER_KEY,
        "LOG_LEVEL": "warn",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'meta.db'}",
        "OBJECT_STORAGE_LOCAL_DIR": str(tmp_path / "objects"),
        "DATASOURCE_LOCAL_CONFIG_NAME": "local_src",
        "DATASOURCE_LOCAL_TYPE": "sqlite",
        "DATASOURCE_LOCAL_DATABASE": str(source),
    }
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", _SCRIPT],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {
        "blocked": True,
        "health": [200, {"status": "healthy"}],
        "created": 202,
        "job": ["completed", None],
        "result_path": True,
        "drivers": [],
        "store": "SqliteMetadataStore",
    }
