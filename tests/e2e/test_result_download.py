"""Result summary, download route and key rotation (contract §14.1–§14.3) through the running
Manager and Worker processes (PostgreSQL, RabbitMQ, S3): the summary matches the decrypted
object, the downloaded bytes are the stored bytes and verify (GCM tag, HMAC), a range request
resumes, and after a rotation of ``APP_ENC_KEY`` an object sealed under the old key still
downloads and verifies, while new objects carry the new version."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from fetcher.crypto import KeySet
from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    MASTER_KEY,
    ManagerApi,
    Stack,
    decrypt_result_object,
    embedded_fetcher,
    rotated_env,
    run_fetcher,
)

pytestmark = E2E

MAPPED = {
    SOURCE_CONFIG: {"public.accounts": ["id", "email"], "ledger.entries": ["entry_id"]},
}


def verify(stored: bytes, keys: KeySet, expected_hmac: str) -> dict[str, Any]:
    """The §6.3 checks a consumer makes: the GCM tag (decryption) and the HMAC."""
    plain = decrypt_result_object(keys.storage, stored)
    assert hmac.new(keys.external_hmac, plain, hashlib.sha256).hexdigest() == expected_hmac
    document: dict[str, Any] = json.loads(plain)
    return document


async def completed_job(stack: Stack, api: ManagerApi | None = None) -> dict[str, Any]:
    job_id = await (api or stack.api).submit(MAPPED)
    job = await (api or stack.api).wait_terminal(job_id)
    assert job["status"] == "completed", job
    return job


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def job(stack: Stack) -> dict[str, Any]:
    async with stack.launcher.running_worker():
        return await completed_job(stack)


def download(
    stack: Stack, job_id: str, base_url: str | None = None, **headers: str
) -> Any:  # the client's coroutine, awaited by the caller
    url = f"{base_url or stack.manager.base_url}/v1/fetcher/{job_id}/result"
    return stack.launcher.http.get(url, headers=headers)


async def test_the_summary_matches_the_decrypted_object(stack: Stack, job: dict[str, Any]) -> None:
    result = job["result"]
    stored = stack.results.read(result["path"])
    document = verify(stored, KeySet.from_text(MASTER_KEY), result["hmac"])
    plain = decrypt_result_object(KeySet.from_text(MASTER_KEY).storage, stored)
    assert result["path"] == job["resultPath"]
    assert result["hmac"] == job["resultHmac"]
    assert result["sizeBytes"] == len(stored)
    assert result["plaintextBytes"] == len(plain)
    assert result["tables"] == {
        ds: {table: len(rows) for table, rows in tables.items()} for ds, tables in document.items()
    }
    assert result["tables"] == {SOURCE_CONFIG: {"accounts": 6, "ledger.entries": 3}}
    assert result["rowCount"] == 9
    assert result["keyVersion"] == "1"
    assert (result["expiresAt"], result["expiredAt"]) == (None, None)
    listed = await stack.launcher.http.get(
        f"{stack.manager.base_url}/v1/fetcher", params={"status": "completed", "limit": "100"}
    )
    item = next(i for i in listed.json()["items"] if i["id"] == job["id"])
    assert item["result"] == {k: v for k, v in result.items() if k != "tables"}


async def test_the_download_is_the_stored_object_and_a_range_resumes(
    stack: Stack, job: dict[str, Any]
) -> None:
    result = job["result"]
    stored = stack.results.read(result["path"])
    whole = await download(stack, job["id"])
    assert whole.status_code == 200, whole.text
    assert whole.content == stored
    assert whole.headers["content-length"] == str(len(stored))
    assert whole.headers["content-type"] == "application/octet-stream"
    assert whole.headers["etag"] == f'"{result["hmac"]}"'
    assert whole.headers["x-fetcher-result-hmac"] == result["hmac"]
    assert whole.headers["x-fetcher-key-version"] == "1"
    verify(whole.content, KeySet.from_text(MASTER_KEY), whole.headers["x-fetcher-result-hmac"])
    # A download that stopped after 100 bytes resumes where it stopped.
    cut = 100
    first = await download(stack, job["id"], Range=f"bytes=0-{cut - 1}")
    rest = await download(
        stack, job["id"], Range=f"bytes={cut}-", **{"If-Range": whole.headers["etag"]}
    )
    assert (first.status_code, rest.status_code) == (206, 206)
    assert first.headers["content-range"] == f"bytes 0-{cut - 1}/{len(stored)}"
    assert rest.headers["content-range"] == f"bytes {cut}-{len(stored) - 1}/{len(stored)}"
    assert first.content + rest.content == stored
    suffix = await download(stack, job["id"], Range="bytes=-10")
    assert (suffix.status_code, suffix.content) == (206, stored[-10:])
    stale = await download(stack, job["id"], Range=f"bytes={cut}-", **{"If-Range": '"other"'})
    assert (stale.status_code, stale.content) == (200, stored)
    past = await download(stack, job["id"], Range=f"bytes={len(stored)}-")
    assert past.status_code == 416
    assert past.json()["code"] == "FET-1102"
    assert past.headers["content-range"] == f"bytes */{len(stored)}"
    cached = await download(stack, job["id"], **{"If-None-Match": whole.headers["etag"]})
    assert (cached.status_code, cached.content) == (304, b"")


async def test_a_pending_job_has_no_result_and_a_deleted_object_is_gone(
    stack: Stack, job: dict[str, Any]
) -> None:
    pending = await stack.api.submit({SOURCE_CONFIG: {"public.accounts": ["id"]}})  # no Worker
    early = await download(stack, pending)
    assert early.status_code == 404
    assert early.json() == {
        "code": "FET-1100",
        "title": "Result Not Available",
        "message": "the job has no result: it is pending",
    }
    unknown = await download(stack, "0190a1b2-0000-7000-8000-0000000000ff")
    assert unknown.json()["code"] == "FET-1001"
    async with stack.launcher.running_worker():  # the pending job completes; delete its object
        done = await stack.api.wait_terminal(pending)
    stack.results.s3.delete_object(Bucket=stack.results.bucket, Key=done["resultPath"])
    gone = await download(stack, pending)
    assert gone.status_code == 410
    assert gone.json()["code"] == "FET-1101"


async def test_a_rotated_key_still_opens_the_old_object(stack: Stack, job: dict[str, Any]) -> None:
    """The rolling rotation of docs/key-rotation.md, one process at a time: Worker first (it
    takes the not-yet-rotated Manager's messages), then a Manager; the old object downloads and
    verifies through the rotated Manager and ``fetcher result get``; new objects are version 2;
    ``rotate-credentials`` moves the stored credentials to the new key (and back at the end, so
    the session's other processes keep reading them)."""
    new_key = KeySet.from_master(secrets.token_bytes(32))
    new_text = base64.b64encode(new_key.master or b"").decode()
    rotated = rotated_env(new_text)
    async with stack.launcher.running_worker(**rotated):
        # A Manager still on the old key: its message is accepted by the rotated Worker.
        from_old_manager = await completed_job(stack)
        manager = await stack.launcher.manager(**rotated)
        api = ManagerApi(stack.launcher.http, manager.base_url)
        from_new_manager = await completed_job(stack, api)
    for fresh in (from_old_manager, from_new_manager):
        assert fresh["result"]["keyVersion"] == "2"
        verify(stack.results.read(fresh["resultPath"]), new_key, fresh["resultHmac"])
    old = await download(stack, job["id"], base_url=manager.base_url)
    assert old.status_code == 200, old.text
    assert old.headers["x-fetcher-key-version"] == "1"
    verify(old.content, KeySet.from_text(MASTER_KEY), old.headers["x-fetcher-result-hmac"])
    consumer = {
        "PATH": os.environ.get("PATH", ""),
        "FETCHER_API_URL": manager.base_url,
        **rotated,
    }
    for opened in (job, from_new_manager):
        code, out, err = await run_fetcher(consumer, "result", "get", opened["id"])
        assert code == 0, err.decode()
        expected = decrypt_result_object(
            (new_key if opened is from_new_manager else KeySet.from_text(MASTER_KEY)).storage,
            stack.results.read(opened["resultPath"]),
        )
        assert out == expected
    await assert_credentials_rotate(stack, rotated)
    await manager.terminate()


async def assert_credentials_rotate(stack: Stack, rotated: dict[str, str]) -> None:
    base = {**stack.launcher.base_env, "FETCHER_MODE": "manager", "LOG_LEVEL": "warn"}
    code, out, err = await run_fetcher({**base, **rotated}, "rotate-credentials")
    assert code == 0, err.decode()
    moved = int(out.split()[1])
    assert moved >= 1, out
    again = await run_fetcher({**base, **rotated}, "rotate-credentials")
    assert again[1].startswith(b"re-encrypted 0 connections"), again
    back = {
        "APP_ENC_KEY": MASTER_KEY,
        "APP_ENC_KEY_VERSION": "1",
        "APP_ENC_KEY_PREVIOUS": f"2:{rotated['APP_ENC_KEY']}",
    }
    code, out, err = await run_fetcher({**base, **back}, "rotate-credentials")
    assert code == 0, err.decode()
    assert int(out.split()[1]) >= moved
    async with stack.launcher.running_worker():  # the session's key reads them again
        await completed_job(stack)


async def test_embedded_mode_summary_download_and_resume(tmp_path: Path) -> None:
    """The same route in embedded mode, over the local store."""
    source = tmp_path / "source.db"
    with contextlib.closing(sqlite3.connect(source)) as db:
        db.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY)")
        db.executemany("INSERT INTO accounts VALUES (?, ?)", [(i, f"n{i}") for i in range(50)])
        db.commit()
    env = {
        "DATASOURCE_LOCAL_CONFIG_NAME": "local_src",
        "DATASOURCE_LOCAL_TYPE": "sqlite",
        "DATASOURCE_LOCAL_DATABASE": str(source),
    }
    async with embedded_fetcher(tmp_path, **env) as embedded, httpx.AsyncClient() as http:
        api = ManagerApi(http, embedded.base_url)
        job_id = await api.submit({"local_src": {"accounts": ["id", "name"], "notes": ["id"]}})
        job = await api.wait_terminal(job_id)
        assert job["status"] == "completed", job
        result = job["result"]
        stored = (tmp_path / "state" / "objects" / result["path"]).read_bytes()
        url = f"{embedded.base_url}/v1/fetcher/{job_id}/result"
        whole = await http.get(url)
        assert (whole.status_code, whole.content) == (200, stored)
        document = verify(
            stored, KeySet.from_text(MASTER_KEY), whole.headers["x-fetcher-result-hmac"]
        )
        assert result["tables"] == {"local_src": {"accounts": 50, "notes": 0}}
        assert result["tables"] == {
            ds: {t: len(rows) for t, rows in tables.items()} for ds, tables in document.items()
        }
        assert result["sizeBytes"] == len(stored)
        head = await http.get(url, headers={"Range": "bytes=0-9"})
        tail = await http.get(
            url, headers={"Range": "bytes=10-", "If-Range": whole.headers["etag"]}
        )
        assert (head.status_code, tail.status_code) == (206, 206)
        assert head.content + tail.content == stored
