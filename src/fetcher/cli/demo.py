"""``fetcher demo``: embedded mode end to end, as a client sees it (contract §1.5).

Builds a sample SQLite ledger, starts embedded mode on a free loopback port, registers the
connection and submits a job through the HTTP API, waits for it, prints the ``job.completed``
CloudEvent from the event feed, then fetches the stored object, decrypts it with the storage
key, verifies the HMAC with the external key and checks the rows against a direct query.
It finishes by showing deduplication and a FET error. Any failed step exits non-zero.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sqlite3
import sys
import tempfile
from collections.abc import Awaitable, Mapping
from pathlib import Path

import httpx

from fetcher.cli.arguments import parse_or_exit_code
from fetcher.cli.demo_data import build_sample_database
from fetcher.cli.demo_keep import Kept, kept_instructions
from fetcher.cli.run import configured_settings, listen_socket, running, startup_refused
from fetcher.cli.terminal import json_document_text, printable
from fetcher.crypto import KeySet, decrypt_object, generate_master_key, hmac_hex
from fetcher.settings import Settings, StartupRefused

__all__ = ["demo_command"]

PRODUCT = "demo"
CONNECTION = "demo_ledger"
LEDGER_FILTER = {"currency": {"eq": ["USD"]}, "amount": {"gte": [1000]}}


class DemoFailure(Exception):
    pass


def _say(title: str, detail: object = "") -> None:
    """One step's title and answer; what the service answered is escaped for the terminal
    (:mod:`fetcher.cli.terminal`), keeping JSON readable as JSON."""
    text = detail if isinstance(detail, str) else json.dumps(detail, indent=2, ensure_ascii=False)
    shown = json_document_text(text)
    print(f"\n== {printable(title)}" + (f"\n{shown}" if shown else ""), flush=True)


def demo_command(argv: list[str], env: dict[str, str]) -> int:
    parsed = parse_or_exit_code(
        "fetcher demo",
        "Run embedded mode end to end on a sample SQLite ledger, through the HTTP API only; "
        "exits non-zero if any step fails. Needs no server.",
        argv,
        lambda parser: parser.add_argument(
            "--keep", action="store_true", help="leave the server running (Ctrl-C stops it)"
        ),
    )
    if isinstance(parsed, int):
        return parsed
    keep = bool(parsed.keep)
    workdir = Path(tempfile.mkdtemp(prefix="fetcher-demo-"))
    try:
        return _run_in(workdir, env, keep=keep)
    finally:
        # Everything the demo made (the sample, the metadata store, the objects) is gone when
        # it ends: after the last step, or on Ctrl-C / SIGTERM with --keep.
        shutil.rmtree(workdir, ignore_errors=True)


def _run_in(workdir: Path, env: dict[str, str], *, keep: bool) -> int:
    sample_dir = workdir / "samples"
    sample_dir.mkdir()
    key = env.get("APP_ENC_KEY", "").strip()
    throwaway = not key
    if throwaway:
        key = generate_master_key()
        print("APP_ENC_KEY is not set: using a throwaway master key for this run.")
    demo_env = {
        "FETCHER_MODE": "embedded",
        "APP_ENC_KEY": key,
        "DATABASE_URL": f"sqlite:///{workdir / 'fetcher.db'}",
        "OBJECT_STORAGE_LOCAL_DIR": str(workdir / "objects"),
        "SQLITE_ALLOWED_DIR": str(sample_dir),
        "SERVER_ADDRESS": "127.0.0.1:0",
        "READYZ_DRAIN_DELAY_SEC": "1",
        "LOG_LEVEL": env.get("LOG_LEVEL", "warn"),
    }
    try:
        settings = configured_settings(demo_env)
    except StartupRefused as refusal:
        return startup_refused(refusal)
    kept = Kept(key, throwaway) if keep else None
    try:
        asyncio.run(_demo(settings, sample_dir, workdir, kept=kept))
    except DemoFailure as failure:
        print(f"\ndemo FAILED: {printable(failure)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C before --keep's handlers were installed
        print(f"\ndemo interrupted; {workdir} removed.", flush=True)
        return 130
    if kept is not None:
        print(f"\nstopped; {workdir} removed.", flush=True)
        return 0
    print("\ndemo finished: every step passed.")
    return 0


async def _demo(settings: Settings, sample_dir: Path, workdir: Path, *, kept: Kept | None) -> None:
    database = sample_dir / "ledger.db"
    build_sample_database(database)
    _say("sample datasource", f"{database} (SQLite: ledger, accounts, archived_entries)")
    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    async with running(settings, sockets=[sock], drain_delay=0):
        _say("embedded mode listening", f"{base}  (API docs: {base}/docs, console: {base}/console)")
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            job_id = await _story(client, settings, database, workdir)
            if kept is not None:
                _say(
                    "--keep: serving until Ctrl-C (then the folder is removed)",
                    kept_instructions(kept, settings, base, workdir, job_id),
                )
                await _until_stopped()


async def _until_stopped() -> None:
    """Wait for Ctrl-C (SIGINT) or SIGTERM; the server then drains and the folder goes."""
    loop, stop = asyncio.get_running_loop(), asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _story(
    client: httpx.AsyncClient, settings: Settings, database: Path, workdir: Path
) -> str:
    """The demonstration's steps; the completed job's ID."""
    created = await _expect(
        client.post(
            "/v1/management/connections",
            headers={"X-Product-Name": PRODUCT},
            json={"configName": CONNECTION, "type": "SQLITE", "databaseName": str(database)},
        ),
        201,
        "register the connection",
    )
    _say("connection registered (POST /v1/management/connections → 201)", created)
    job_body = _job_body()
    accepted = await _expect(client.post("/v1/fetcher", json=job_body), 202, "submit the job")
    _say("job submitted (POST /v1/fetcher → 202)", accepted)
    job = await _wait_terminal(client, str(accepted["jobId"]))
    _say(f"job {job['status']} (GET /v1/fetcher/{job['id']})", job)
    if job["status"] != "completed":
        raise DemoFailure(f"the job failed: {job.get('metadata')}")
    event = await _completed_event(client, str(job["id"]))
    _say("job.completed CloudEvent headers", event["headers"])
    _say("job.completed payload", event["data"])
    document = _verified_document(settings, workdir, job, event["data"])
    _check_rows(document, database)
    await _dedup_and_error(client, job_body, str(job["id"]))
    return str(job["id"])


def _job_body() -> dict[str, object]:
    return {
        "dataRequest": {
            "mappedFields": {
                CONNECTION: {
                    "ledger": ["id", "account", "amount", "booked_at", "memo"],
                    "accounts": ["*"],
                    "archived_entries": ["*"],
                }
            },
            "filters": {CONNECTION: {"ledger": LEDGER_FILTER}},
        },
        "metadata": {"source": PRODUCT, "correlationId": "demo-run"},
    }


async def _expect(call: Awaitable[httpx.Response], status: int, step: str) -> dict[str, object]:
    response = await call
    if response.status_code != status:
        raise DemoFailure(f"{step}: HTTP {response.status_code} {response.text}")
    body = response.json()
    if not isinstance(body, dict):
        raise DemoFailure(f"{step}: the response is not a JSON object")
    return body


async def _wait_terminal(client: httpx.AsyncClient, job_id: str) -> dict[str, object]:
    for _ in range(600):
        job = await _expect(client.get(f"/v1/fetcher/{job_id}"), 200, "read the job")
        if job["status"] in ("completed", "failed"):
            return job
        await asyncio.sleep(0.1)
    raise DemoFailure("the job did not finish within 60 s")


async def _completed_event(client: httpx.AsyncClient, job_id: str) -> Mapping[str, object]:
    feed = await _expect(
        client.get("/v1/events", params={"type": "completed", "wait": "10"}), 200, "read events"
    )
    items = feed.get("items")
    if not isinstance(items, list):
        raise DemoFailure("read events: the feed has no items list")
    for item in items:
        if isinstance(item, dict) and item["data"]["job_id"] == job_id:
            return item
    raise DemoFailure("no job.completed event arrived in the feed")


def _verified_document(
    settings: Settings, workdir: Path, job: Mapping[str, object], payload: object
) -> dict[str, dict[str, list[dict[str, object]]]]:
    keys: KeySet = settings.keys
    stored = (workdir / "objects" / str(job["resultPath"])).read_bytes()
    plaintext = decrypt_object(keys.storage, stored)
    digest = hmac_hex(keys.external_hmac, plaintext)
    if not isinstance(payload, dict):
        raise DemoFailure("the job.completed event data is not a JSON object")
    expected = {job["resultHmac"], payload["result"]["hmac"]}
    if expected != {digest}:
        raise DemoFailure("the result HMAC does not match the job and the event")
    _say(
        "stored object decrypted (storage key) and verified",
        f"{len(stored)} stored bytes → {len(plaintext)} plaintext bytes\n"
        f"HMAC-SHA256 (external key) = {digest}  ✓ matches resultHmac and result.hmac",
    )
    document = json.loads(plaintext)
    if not isinstance(document, dict):
        raise DemoFailure("the result document is not a JSON object")
    return document


def _check_rows(document: dict[str, dict[str, list[dict[str, object]]]], database: Path) -> None:
    tables = document[CONNECTION]
    counts = {name: len(rows) for name, rows in tables.items()}
    _say("rows per table", counts)
    _say("first ledger rows", tables["ledger"][:3])
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        (direct,) = db.execute(
            "SELECT COUNT(*) FROM ledger WHERE currency = 'USD' AND amount >= 1000"
        ).fetchone()
    db.close()
    if counts["ledger"] != direct or counts["archived_entries"] != 0:
        raise DemoFailure(f"row counts differ from a direct query ({direct} expected)")
    _say(
        "direct SQL check", f"SELECT COUNT(*) … WHERE currency='USD' AND amount>=1000 → {direct} ✓"
    )


async def _dedup_and_error(
    client: httpx.AsyncClient, job_body: dict[str, object], job_id: str
) -> None:
    again = await _expect(client.post("/v1/fetcher", json=job_body), 200, "resubmit the job")
    if again["jobId"] != job_id:
        raise DemoFailure("the identical request did not return the same job")
    _say("identical request again (POST /v1/fetcher → 200, same jobId)", again)
    bad = {
        "dataRequest": {"mappedFields": {CONNECTION: {"ledger": ["*", "id"]}}},
        "metadata": {"source": PRODUCT},
    }
    response = await client.post("/v1/fetcher", json=bad)
    if response.status_code != 400 or response.json().get("code") != "FET-0401":
        raise DemoFailure(f"a bad request was not rejected with FET-0401: {response.text}")
    _say(f"a bad request (POST /v1/fetcher → {response.status_code})", response.json())
