"""Issue 33, item 9: the command line a new operator meets in the first hour, through the
installed ``fetcher`` (real subprocesses) and a real embedded process on the default address.

* ``fetcher --version`` prints the version, exit 0; ``fetcher events|result|jobs --help``
  print their real help, exit 0; ``fetcher bogus`` names the unknown command and lists the
  commands, exit 2; ``events tail --help`` holds no reStructuredText markup.
* ``fetcher jobs list`` needs no ``--api`` against a local process on ``127.0.0.1:4006`` (the
  documented default), fits a 100-column terminal, takes a connection by name as well as by
  ID, and a ``--since`` the CLI cannot read is an error naming ``--since``, not
  ``createdFrom``.
* ``fetcher events tail --feed`` starts from now: an event that existed before it started is
  not printed; ``--from-start`` and ``--since`` replay it.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import secrets
import select
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from fetcher import __version__
from fetcher.cli.demo_data import build_sample_database
from fetcher.cli.manager_api import DEFAULT_API_URL
from tests.e2e.harness import FETCHER_BIN, MASTER_KEY, FetcherProcess, ProcessLauncher, eventually
from tests.fakes.hostile_http import Answer, HostileHttpServer
from tests.terminal import read_terminal

pytestmark = pytest.mark.integration
#: The async tests share the e2e session loop (the module fixture's process lives on it).
SESSION_LOOP = pytest.mark.asyncio(loop_scope="session")

CONNECTION = "ledger_first_hour"
DEFAULT_PORT = 4006


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``fetcher args…`` piped, with no FETCHER_API_URL unless ``env`` sets it."""
    base = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8", "APP_ENC_KEY": MASTER_KEY}
    return subprocess.run(  # noqa: S603 - our own console script, fixed argv
        [FETCHER_BIN, *args],
        env={**base, **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# --- the command itself --------------------------------------------------------------------


def test_version_prints_the_version_and_exits_0() -> None:
    shown = run_cli("--version")
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"fetcher {__version__}\n", "")


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        ("events", "usage: fetcher events tail"),
        ("result", "usage: fetcher result get"),
        ("jobs", "usage: fetcher jobs list"),
    ],
)
def test_each_client_command_prints_real_help(command: str, usage: str) -> None:
    shown = run_cli(command, "--help", COLUMNS="100")
    assert shown.returncode == 0, shown.stderr
    assert usage in shown.stdout
    assert "options:" in shown.stdout
    assert len(shown.stdout.splitlines()) > 10
    assert max(len(line) for line in shown.stdout.splitlines()) <= 100


def test_an_unknown_command_is_named_with_the_list_and_exit_2() -> None:
    shown = run_cli("bogus")
    assert shown.returncode == 2
    assert shown.stderr.startswith("fetcher: unknown command 'bogus'\n")
    for command in ("run", "demo", "events tail", "result get", "jobs list"):
        assert f"\n  {command}" in shown.stderr
    assert shown.stdout == ""


def test_a_missing_subcommand_is_a_usage_error() -> None:
    for command, usage in (("events", "tail"), ("result", "get"), ("jobs", "list")):
        shown = run_cli(command)
        assert shown.returncode == 2
        assert f"usage: fetcher {command} {usage}" in shown.stderr


def test_events_tail_help_has_no_restructuredtext() -> None:
    shown = run_cli("events", "tail", "--help")
    assert shown.returncode == 0
    for markup in ("``", ":class:", ":func:", ":mod:"):
        assert markup not in shown.stdout
    assert "--from-start" in shown.stdout
    assert "--since" in shown.stdout


def test_since_the_cli_cannot_read_names_since() -> None:
    shown = run_cli("jobs", "list", "--since", "yesterday")
    assert shown.returncode == 2
    assert "argument --since: 'yesterday' is not a duration back from now" in shown.stderr
    assert "createdFrom" not in shown.stderr


def test_a_date_the_manager_refuses_names_the_option_typed() -> None:
    """An out-of-range date the CLI passes on: the Manager's 400 names ``createdFrom``; the
    CLI's line names ``--since``."""
    refusal = {
        "code": "FET-0408",
        "title": "Invalid Date Format",
        "message": "createdFrom is out of range",
        "fields": {"createdFrom": "createdFrom is out of range"},
    }
    with HostileHttpServer({"/v1/fetcher": Answer.json(refusal, 400)}) as server:
        shown = run_cli("jobs", "list", "--since", "0001-01-01T00:00:00+23:59", "--api", server.url)
    assert shown.returncode == 2
    assert shown.stderr == "Error: 400 FET-0408 Invalid Date Format: --since is out of range\n"


# --- against a local embedded process on the default address ------------------------------


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def local(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Any]]:
    """An embedded ``fetcher run`` on ``127.0.0.1:4006`` with one completed and one failed
    job of the connection ``ledger_first_hour``."""
    if not _port_free(DEFAULT_PORT):
        pytest.skip("127.0.0.1:4006 is taken by another process on this shared machine")
    workdir = tmp_path_factory.mktemp("first-hour")
    allowed = workdir / "allowed"
    allowed.mkdir()
    database = allowed / "ledger.db"
    build_sample_database(database)
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "FETCHER_MODE": "embedded",
        "SERVER_ADDRESS": f"127.0.0.1:{DEFAULT_PORT}",
        "APP_ENC_KEY": MASTER_KEY,
        "DATABASE_URL": f"sqlite:///{workdir / 'meta.db'}",
        "OBJECT_STORAGE_LOCAL_DIR": str(workdir / "objects"),
        "SQLITE_ALLOWED_DIR": str(allowed),
        "READYZ_DRAIN_DELAY_SEC": "0",
        "LOG_LEVEL": "warn",
    }
    (workdir / "logs").mkdir()
    async with httpx.AsyncClient(base_url=DEFAULT_API_URL, timeout=30.0) as http:
        launcher = ProcessLauncher(env, workdir / "logs", http, secrets=(MASTER_KEY,))
        process: FetcherProcess = launcher._spawn("embedded", env, DEFAULT_API_URL)
        try:
            await process.wait_healthy(http)
            created = await http.post(
                "/v1/management/connections",
                headers={"X-Product-Name": "payments"},
                json={"configName": CONNECTION, "type": "SQLITE", "databaseName": str(database)},
            )
            assert created.status_code == 201, created.text
            ok = await settled(http, await submit(http, "accounts"))
            bad = await settled(http, await submit(http, "no_such_table"))
            assert (ok["status"], bad["status"]) == ("completed", "failed")
            yield {"http": http, "connection": created.json()["id"], "ok": ok, "bad": bad}
        finally:
            await launcher.stop_all()


async def submit(http: httpx.AsyncClient, table: str) -> str:
    body = {
        "dataRequest": {"mappedFields": {CONNECTION: {table: ["*"]}}},
        "metadata": {"source": "payments", "run": secrets.token_hex(6)},
    }
    response = await http.post("/v1/fetcher", json=body)
    assert response.status_code == 202, response.text
    return str(response.json()["jobId"])


async def settled(http: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        job: dict[str, Any] = (await http.get(f"/v1/fetcher/{job_id}")).json()
        return job if job["status"] in ("completed", "failed") else None

    return await eventually(done, f"job {job_id}", within=30.0, interval=0.05)


@SESSION_LOOP
async def test_jobs_list_needs_no_api_option_locally(local: dict[str, Any]) -> None:
    shown = await asyncio.to_thread(run_cli, "jobs", "list")
    assert shown.returncode == 0, shown.stderr
    ids = [json.loads(line)["id"] for line in shown.stdout.splitlines()]
    assert ids[:2] == [local["bad"]["id"], local["ok"]["id"]]


@SESSION_LOOP
async def test_a_connection_by_name_lists_what_its_id_lists(local: dict[str, Any]) -> None:
    by_name = await asyncio.to_thread(run_cli, "jobs", "list", "--connection", CONNECTION)
    by_id = await asyncio.to_thread(run_cli, "jobs", "list", "--connection", local["connection"])
    assert (by_name.returncode, by_id.returncode) == (0, 0), by_name.stderr
    assert by_name.stdout == by_id.stdout
    assert len(by_name.stdout.splitlines()) == 2
    unknown = await asyncio.to_thread(run_cli, "jobs", "list", "--connection", "no_such_name")
    assert unknown.returncode == 1
    assert unknown.stderr == "Error: --connection: no connection is named 'no_such_name'\n"


def _terminal_run(*args: str, columns: int) -> str:
    """``fetcher args…`` with a terminal of ``columns`` columns as stdout; what it showed."""
    master, slave = pty.openpty()
    env = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8", "COLUMNS": str(columns)}
    process = subprocess.Popen(  # noqa: S603 - our own console script, fixed argv
        [FETCHER_BIN, *args], env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave
    )
    os.close(slave)
    shown = read_terminal(master, process)
    os.close(master)
    assert shown is not None, "fetcher did not finish in 60 s"
    assert process.wait(30) == 0, shown
    return shown.decode().replace("\r\n", "\n")


@SESSION_LOOP
async def test_the_table_fits_100_columns(local: dict[str, Any]) -> None:
    shown = await asyncio.to_thread(_terminal_run, "jobs", "list", columns=100)
    lines = shown.splitlines()
    assert lines[0].split() == ["CREATED", "ID", "STATUS", "PRODUCT", "ERROR"]
    assert local["bad"]["id"] in lines[1]
    assert "failed" in lines[1]
    assert "payments" in lines[1]
    assert max(len(line) for line in lines) <= 100, lines


def start_tail(stderr: int) -> subprocess.Popen[bytes]:
    """``events tail --feed <default> --count 1`` from now, stdout piped."""
    env = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8", "APP_ENC_KEY": MASTER_KEY}
    return subprocess.Popen(  # noqa: S603 - our own console script, fixed argv
        [FETCHER_BIN, "events", "tail", "--feed", DEFAULT_API_URL, "--count", "1"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
    )


# --- events tail starts from now ------------------------------------------------------------


@SESSION_LOOP
async def test_events_tail_starts_from_now_unless_asked_to_replay(local: dict[str, Any]) -> None:
    old = local["ok"]["id"]
    replayed = await asyncio.to_thread(
        run_cli, "events", "tail", "--feed", DEFAULT_API_URL, "--from-start", "--count", "1"
    )
    assert replayed.returncode == 0, replayed.stderr
    assert f" completed {old} " in replayed.stdout
    since = await asyncio.to_thread(
        run_cli, "events", "tail", "--feed", DEFAULT_API_URL, "--since", "1h", "--count", "1"
    )
    assert f" completed {old} " in since.stdout
    master, slave = pty.openpty()  # stderr on a terminal: the "following … after N" line
    tail = start_tail(slave)
    os.close(slave)
    try:
        status = b""
        deadline = time.monotonic() + 30
        while b"following" not in status and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                status += os.read(master, 4096)
        assert b"following" in status, status
        new = await settled(local["http"], await submit(local["http"], "ledger"))
        out, _ = await asyncio.to_thread(tail.communicate, None, 60)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
        os.close(master)
    assert tail.returncode == 0
    lines = out.decode().splitlines()
    assert len(lines) == 1, lines
    assert f" {new['status']} {new['id']} " in lines[0]
    assert old not in out.decode()
