"""Issue 33, item 11: every Python block of ``docs/events.md`` and ``docs/jobs.md`` runs as
written — extracted from the page, executed by a fresh interpreter against a real embedded
``fetcher run`` — and prints what the page shows after it (IDs and times compared by form).

The blocks read their settings from the variables ``fetcher demo --keep`` prints
(``FETCHER_API_URL``, ``FETCHER_EXTERNAL_KEY``, ``FETCHER_STORAGE_KEY``,
``OBJECT_STORAGE_LOCAL_DIR``) plus ``LEDGER_DB`` (the sample SQLite file) and, for the
authentication block, ``FETCHER_TOKEN`` from ``fetcher dev-token``. The consumer block defines
``handle``; the test delivers it one real ``job.completed`` event (the feed's headers and
body, signed as the Worker signs an AMQP publish, §8.5), since embedded mode has no broker.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from fetcher.cli.demo_data import build_sample_database
from fetcher.consumer import ConsumerKeys
from fetcher.crypto import sign_message
from tests.e2e.conftest import E2E
from tests.e2e.harness import FETCHER_BIN, MASTER_KEY, embedded_fetcher, eventually
from tests.fakes.jwks_harness import SECRET_B64
from tests.fakes.jwks_server import ISSUER

pytestmark = E2E

DOCS = Path(__file__).resolve().parents[2] / "docs"
KEYS = ConsumerKeys.from_master(MASTER_KEY)
EXCHANGE = "fetcher.job.events"
_BLOCK = re.compile(r"```python\n(.*?)```\n(?:\n```(?:text|console)\n(.*?)```)?", re.S)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z")


@dataclass(frozen=True)
class Block:
    code: str
    shown: str | None  # the text or console block right after it, if any


def blocks(page: str) -> list[Block]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return [Block(code, shown) for code, shown in _BLOCK.findall(text)]


def form(text: str) -> str:
    """``text`` with its IDs and instants replaced by placeholders."""
    return _TIME.sub("<time>", _UUID.sub("<id>", text))


def run_block(code: str, env: dict[str, str], *args: str) -> str:
    ran = subprocess.run(  # noqa: S603 - the test's interpreter runs a documented block
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, f"{code}\n---\n{ran.stderr}"
    return ran.stdout


@dataclass(frozen=True)
class Local:
    env: dict[str, str]
    base_url: str


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def local(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Local]:
    root = tmp_path_factory.mktemp("doc-snippets")
    allowed = root / "allowed"
    allowed.mkdir()
    build_sample_database(allowed / "ledger.db")
    assert KEYS.storage is not None
    async with embedded_fetcher(root, SQLITE_ALLOWED_DIR=str(allowed)) as process:
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "FETCHER_API_URL": process.base_url,
            "FETCHER_EXTERNAL_KEY": KEYS.external_hmac.hex(),
            "FETCHER_STORAGE_KEY": KEYS.storage.hex(),
            "OBJECT_STORAGE_LOCAL_DIR": str(root / "state" / "objects"),
            "LEDGER_DB": str(allowed / "ledger.db"),
        }
        yield Local(env, process.base_url)


async def _signed_delivery(base_url: str, job_id: str) -> dict[str, object]:
    """The job's ``job.completed`` as an AMQP delivery: the feed's headers and body, with
    the §8.5 signing headers a publish carries."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30.0) as http:

        async def found() -> dict[str, object] | None:
            page = (await http.get("/v1/events", params={"type": "completed"})).json()
            items = [i for i in page["items"] if i["data"]["job_id"] == job_id]
            return items[0] if items else None

        item = await eventually(found, f"the event of {job_id}", within=30.0, interval=0.1)
    body = json.dumps(item["data"], separators=(",", ":")).encode()
    t = int(time.time())
    routing_key = str(item["routingKey"])
    signature = sign_message(
        KEYS.external_hmac, t=t, body=body, exchange=EXCHANGE, routing_key=routing_key, tenant=""
    )
    headers = {
        **item["headers"],  # type: ignore[dict-item]
        "t": str(t),
        "signature-version": "v1",
        "x-message-signature": signature,
    }
    return {
        "headers": headers,
        "body": body.decode(),
        "exchange": EXCHANGE,
        "routing_key": routing_key,
    }


#: Calls the consumer block's ``handle`` with the delivery in ``argv[1]`` (a JSON file).
_DELIVER = """
import asyncio, json, sys
delivery = json.loads(open(sys.argv[1]).read())
asyncio.run(handle(delivery["headers"], delivery["body"].encode(), delivery["exchange"],
                   delivery["routing_key"]))
"""


async def test_events_md_blocks_run_as_written(local: Local, tmp_path: Path) -> None:
    consumer, sync_job, async_job, _auth = blocks("events.md")
    shown = await asyncio.to_thread(run_block, sync_job.code, local.env)
    assert sync_job.shown is not None
    assert shown == sync_job.shown
    again = await asyncio.to_thread(run_block, async_job.code, local.env)
    assert async_job.shown is not None
    assert again == async_job.shown

    async with httpx.AsyncClient(base_url=local.base_url) as http:
        jobs = (await http.get("/v1/fetcher", params={"status": "completed"})).json()["items"]
    delivery = await _signed_delivery(local.base_url, jobs[0]["id"])
    file = tmp_path / "delivery.json"
    file.write_text(json.dumps(delivery))
    handled = await asyncio.to_thread(run_block, consumer.code + _DELIVER, local.env, str(file))
    assert handled == f"{jobs[0]['id']} {{'ledger': {{'accounts': 5}}}}\n"
    twice = await asyncio.to_thread(run_block, consumer.code + _DELIVER, local.env, str(file))
    assert twice == handled  # a fresh process: its MemoryDeduplicator starts empty


async def test_jobs_md_blocks_run_as_written(local: Local) -> None:
    """Run after the events.md blocks (one completed job): one more completed and one failed
    job make the three the page shows, newest first."""
    async with httpx.AsyncClient(base_url=local.base_url, timeout=30.0) as http:
        for table in ("ledger", "no_such_table"):
            body = {
                "dataRequest": {"mappedFields": {"ledger": {table: ["*"]}}},
                "metadata": {"source": "payments"},
            }
            job_id = (await http.post("/v1/fetcher", json=body)).json()["jobId"]

            async def settled(job_id: str = job_id) -> bool | None:
                job = (await http.get(f"/v1/fetcher/{job_id}")).json()
                return True if job["status"] in ("completed", "failed") else None

            await eventually(settled, f"job {job_id}", within=30.0, interval=0.05)
    listing, failed, retry = blocks("jobs.md")
    for block in (listing, failed, retry):
        shown = await asyncio.to_thread(run_block, block.code, local.env)
        assert block.shown is not None
        assert form(shown) == form(block.shown)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def protected(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Local]:
    root = tmp_path_factory.mktemp("doc-snippets-jwt")
    allowed = root / "allowed"
    allowed.mkdir()
    build_sample_database(allowed / "ledger.db")
    auth = {"AUTH_MODE": "jwt", "AUTH_ISSUER": ISSUER, "AUTH_JWT_SECRET": SECRET_B64}
    async with embedded_fetcher(root, SQLITE_ALLOWED_DIR=str(allowed), **auth) as process:
        minted = await asyncio.to_thread(
            subprocess.run,
            [FETCHER_BIN, "dev-token", "--sub", "payments-etl", "--scope", "fetcher:admin"],
            env={"PATH": "/usr/bin:/bin", **auth},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "FETCHER_API_URL": process.base_url,
            "FETCHER_TOKEN": minted.stdout.strip(),
            "LEDGER_DB": str(allowed / "ledger.db"),
        }
        yield Local(env, process.base_url)


async def test_the_authentication_block_runs_as_written(protected: Local) -> None:
    auth = blocks("events.md")[3]
    shown = await asyncio.to_thread(run_block, auth.code, protected.env)
    assert auth.shown is not None
    printed = [line for line in auth.shown.splitlines() if not line.startswith("$ ")]
    assert form(shown).splitlines() == form("\n".join(printed)).splitlines()
