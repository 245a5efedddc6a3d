"""The SDK and the consumer commands against a real ``fetcher run`` with ``AUTH_MODE=jwt``
(embedded, HS256 secret, a SQLite sample datasource), with tokens from ``fetcher dev-token``
as an operator would mint them (§12):

* ``FetcherClient`` (sync) with a token creates a connection and reads it back with
  ``createdBy`` = the token's ``sub``, then drives a job to ``completed``;
  ``AsyncFetcherClient`` without a token gets ``AuthenticationError`` (the challenge
  exposed), with a token lacking the scope ``PermissionDeniedError`` naming it;
* ``fetcher events tail --feed … --count 1`` with ``FETCHER_TOKEN`` prints the job's event;
  without a token it exits 2 with the 401 and a hint; ``fetcher result get <jobId>`` with
  ``FETCHER_TOKEN`` (and with ``--token``) writes the verified result.

No token appears in the process's logs or in any command's output.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from fetcher.cli.demo_data import build_sample_database
from fetcher.client import (
    AsyncFetcherClient,
    AuthenticationError,
    FetcherClient,
    Job,
    PermissionDeniedError,
)
from tests.e2e.conftest import E2E
from tests.e2e.harness import FETCHER_BIN, MASTER_KEY, FetcherProcess, embedded_fetcher
from tests.fakes.jwks_harness import SECRET_B64
from tests.fakes.jwks_server import ISSUER

pytestmark = E2E

AUTH = {"AUTH_MODE": "jwt", "AUTH_ISSUER": ISSUER, "AUTH_JWT_SECRET": SECRET_B64}
SUB = "sdk-e2e"
CHALLENGE = 'Bearer realm="fetcher"'


def dev_token(*args: str) -> str:
    minted = subprocess.run(  # noqa: S603 - the installed fetcher, fixed arguments
        [FETCHER_BIN, "dev-token", *args],
        env={"PATH": "/usr/bin:/bin", **AUTH},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert minted.returncode == 0, minted.stderr
    return minted.stdout.strip()


@dataclass
class Protected:
    process: FetcherProcess
    database: Path
    objects: Path
    admin: str
    reader: str
    connection_id: str
    job: Job

    @property
    def tokens(self) -> tuple[str, str]:
        return self.admin, self.reader


def drive_a_job(base_url: str, token: str, database: Path) -> tuple[str, Job]:
    """The sync client as a user writes it: create, read back, submit, wait."""
    with FetcherClient(base_url, token=token) as api:
        created = api.create_connection(
            {"configName": "ledger", "type": "SQLITE", "databaseName": str(database)},
            product="payments",
        )
        assert created["createdBy"] == SUB
        assert api.get_connection(created["id"])["createdBy"] == SUB
        submitted = api.submit({"ledger": {"accounts": ["*"]}}, metadata={"source": "payments"})
        job = api.wait(submitted.job_id, timeout=60)
    return created["id"], job


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def protected(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Protected]:
    root = tmp_path_factory.mktemp("sdk-auth")
    allowed = root / "allowed"
    allowed.mkdir()
    build_sample_database(allowed / "ledger.db")
    admin = await asyncio.to_thread(dev_token, "--sub", SUB, "--scope", "fetcher:admin")
    reader = await asyncio.to_thread(
        dev_token, "--sub", "ro", "--scope", "fetcher:connections:read"
    )
    async with embedded_fetcher(
        root, LOG_LEVEL="info", SQLITE_ALLOWED_DIR=str(allowed), **AUTH
    ) as process:
        connection_id, job = await asyncio.to_thread(
            drive_a_job, process.base_url, admin, allowed / "ledger.db"
        )
        objects = root / "state" / "objects"
        database = allowed / "ledger.db"
        yield Protected(process, database, objects, admin, reader, connection_id, job)
        logs = process.logs()
    for token in (admin, reader):
        assert token not in logs
        assert token.rsplit(".", 1)[1] not in logs


async def test_the_sync_client_drives_a_job_as_its_subject(protected: Protected) -> None:
    job = protected.job
    assert job["status"] == "completed", job
    assert job["createdBy"] == SUB
    assert job["resultPath"]


async def test_the_async_client_without_a_token_or_the_scope(protected: Protected) -> None:
    url = protected.process.base_url
    async with AsyncFetcherClient(url) as anonymous:
        assert (await anonymous.health())["status"] == "healthy"  # open without a token
        with pytest.raises(AuthenticationError) as unauthorized:
            await anonymous.get_connection(protected.connection_id)
    assert unauthorized.value.code == "FET-0010"
    assert unauthorized.value.www_authenticate == CHALLENGE
    async with AsyncFetcherClient(url, token=protected.reader) as reader:
        read = await reader.get_connection(protected.connection_id)
        assert read["createdBy"] == SUB
        with pytest.raises(PermissionDeniedError) as forbidden:
            await reader.get_job(protected.job["id"])
    assert forbidden.value.code == "FET-0011"
    assert forbidden.value.missing_scope == "fetcher:jobs:read"
    assert protected.reader not in str(forbidden.value)
    async with AsyncFetcherClient(url, token=protected.admin + "x") as tampered:
        with pytest.raises(AuthenticationError) as refused:
            await tampered.get_job(protected.job["id"])
    assert refused.value.www_authenticate == f'{CHALLENGE}, error="invalid_token"'


async def fetcher(protected: Protected, *args: str, token: str | None) -> tuple[int, str, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "APP_ENC_KEY": MASTER_KEY,
        "OBJECT_STORAGE_LOCAL_DIR": str(protected.objects),
    }
    if token is not None:
        env["FETCHER_TOKEN"] = token
    process = await asyncio.create_subprocess_exec(
        FETCHER_BIN,
        *args,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    text, errors = out.decode(), err.decode()
    for secret in protected.tokens:
        assert secret not in text
        assert secret not in errors
    return process.returncode, text, errors


async def test_events_tail_reads_the_feed_with_fetcher_token(protected: Protected) -> None:
    url, job_id = protected.process.base_url, protected.job["id"]
    tail = ("events", "tail", "--feed", url, "--after", "0", "--count", "1")
    code, out, err = await fetcher(protected, *tail, token=protected.admin)
    assert code == 0, err
    assert out.split(" ")[1:3] == ["completed", job_id]
    assert f"path={protected.job['resultPath']}" in out
    code, out, err = await fetcher(protected, *tail, token=None)
    assert (code, out) == (2, "")
    assert "FET-0010" in err
    assert "set FETCHER_TOKEN" in err
    code, _, err = await fetcher(protected, *tail, token=protected.reader)
    assert code == 2
    assert "token lacks scope fetcher:events:read" in err


async def test_result_get_reads_the_job_with_a_token(protected: Protected, tmp_path: Path) -> None:
    job_id, url = protected.job["id"], protected.process.base_url
    target = tmp_path / "result.json"
    get = ("result", "get", job_id, "--api", url)
    code, out, err = await fetcher(protected, *get, "-o", str(target), token=protected.admin)
    assert (code, out, err) == (0, "", "")
    rows = json.loads(target.read_bytes())["ledger"]["accounts"]
    with contextlib.closing(sqlite3.connect(protected.database)) as db:
        codes = sorted(code for (code,) in db.execute("SELECT code FROM accounts"))
    assert sorted(row["code"] for row in rows) == codes
    code, out, _ = await fetcher(protected, *get, "--token", protected.admin, token=None)
    assert code == 0
    assert json.loads(out) == json.loads(target.read_bytes())
    code, out, err = await fetcher(protected, *get, token=None)
    assert (code, out) == (2, "")
    assert "FET-0010" in err
    assert "set FETCHER_TOKEN" in err


def _expiry(token: str) -> int:
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    expiry: int = claims["exp"]
    return expiry


async def test_events_tail_follows_a_rotated_token_file(tmp_path: Path) -> None:
    """A long ``events tail --feed`` with ``FETCHER_TOKEN_FILE`` outlives its first token: the
    file is read before every request, so the rotated token is sent once the first one has
    expired (no leeway). With a token read once, the request after the expiry gets a 401 and
    the command exits 2 before the third event."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    build_sample_database(allowed / "ledger.db")
    admin = await asyncio.to_thread(dev_token, "--sub", SUB, "--scope", "fetcher:admin")
    rotated = await asyncio.to_thread(dev_token, "--sub", "tail", "--scope", "fetcher:events:read")
    token_file = tmp_path / "token"
    async with embedded_fetcher(
        tmp_path, SQLITE_ALLOWED_DIR=str(allowed), AUTH_LEEWAY_SECONDS="0", **AUTH
    ) as process:
        url = process.base_url

        def submit(n: int) -> str:
            with FetcherClient(url, token=admin) as api:
                if n == 1:
                    api.create_connection(
                        {
                            "configName": "ledger",
                            "type": "SQLITE",
                            "databaseName": str(allowed / "ledger.db"),
                        },
                        product="payments",
                    )
                meta = {"source": "payments", "n": n}
                job = api.submit({"ledger": {"accounts": ["*"]}}, metadata=meta).job_id
                return api.wait(job, timeout=60).id

        jobs = [await asyncio.to_thread(submit, 1)]
        # Minted only now, so that a slow start of the process or of the first job cannot use
        # up its life before the tail's first request (it did once in CI with 3 s from the top).
        short = await asyncio.to_thread(
            dev_token, "--sub", "tail", "--scope", "fetcher:events:read", "--ttl", "5s"
        )
        token_file.write_text(short + "\n")
        tail = await asyncio.create_subprocess_exec(
            FETCHER_BIN,
            *("events", "tail", "--feed", url, "--after", "0", "--count", "3"),
            env={
                "PATH": "/usr/bin:/bin",
                "APP_ENC_KEY": MASTER_KEY,
                "FETCHER_TOKEN_FILE": str(token_file),
            },
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert tail.stdout is not None
            first = await asyncio.wait_for(tail.stdout.readline(), 30)
            assert first.decode().split(" ")[1:3] == ["completed", jobs[0]]
            replacement = tmp_path / "token.new"  # replaced whole, as a mounted token is
            replacement.write_text(rotated + "\n")
            replacement.replace(token_file)
            await asyncio.sleep(max(0.0, _expiry(short) + 1.5 - time.time()))
            jobs.append(await asyncio.to_thread(submit, 2))
            jobs.append(await asyncio.to_thread(submit, 3))
            out, err = await asyncio.wait_for(tail.communicate(), 60)
        finally:
            if tail.returncode is None:
                tail.kill()
                await tail.wait()
    assert tail.returncode == 0, err.decode()
    lines = [first.decode(), *out.decode().splitlines(keepends=True)]
    assert [line.split(" ")[2] for line in lines] == jobs
    for secret in (admin, short, rotated):
        assert secret not in out.decode() + err.decode()
