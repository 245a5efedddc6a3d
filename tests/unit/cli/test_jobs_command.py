"""``fetcher jobs list`` against the in-process Manager: a table on a terminal, JSON lines when
piped, filters sent as the API's parameters, hostile server text escaped, errors as exit codes."""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fetcher.cli.jobs import jobs_command, parse_moment
from tests.unit.client.bridge import LoopTransport
from tests.unit.client.conftest import InProcess, manager

__all__ = ["manager"]  # the in-process Manager fixture
from tests.unit.client.test_jobs_list import record

NOW = datetime(2026, 3, 1, 1, 0, tzinfo=UTC)
ENV = {"FETCHER_API_URL": "http://127.0.0.1"}
HOSTILE = "\x1b[2J\x1b]0;owned\x07 \u202eevil"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def run(
    manager: InProcess, argv: list[str], out: io.StringIO
) -> tuple[int, str, LoopTransport]:
    transport = LoopTransport(manager.app, asyncio.get_running_loop())
    err = io.StringIO()

    def call() -> int:
        return jobs_command(argv, ENV, out, err, transport=transport, now=NOW)

    code = await asyncio.to_thread(call)
    return code, err.getvalue(), transport


async def seed(manager: InProcess) -> None:
    store = manager.app.state.runtime.store
    for n in range(50):  # one a minute from T0 = 00:00
        job = record(n, "failed" if n % 2 else "completed")
        if n == 49:
            job = replace(record(n, "failed", source=f"pay{HOSTILE}"), error=f"bad {HOSTILE}")
        await store.insert_job(job)


async def test_piped_output_is_json_lines_with_the_filters_sent(manager: InProcess) -> None:
    await seed(manager)
    out = io.StringIO()
    code, err, transport = await run(manager, ["list", "--status", "failed", "--since", "30m"], out)
    assert (code, err) == (0, "")
    lines = out.getvalue().splitlines()
    items = [json.loads(line) for line in lines]
    # Created from 00:30 (1 h - 30 min before NOW): the failed jobs 31, 33, ... 49, newest first.
    assert [i["id"] for i in items] == [record(n, "failed").id for n in range(49, 30, -2)]
    assert all(line.isascii() and "\x1b" not in line for line in lines)
    assert items[0]["metadata"]["source"] == f"pay{HOSTILE}"  # JSON keeps the value exactly
    sent = transport.requests[0].url.params
    assert sent["status"] == "failed"
    assert sent["createdFrom"] == "2026-03-01T00:30:00.000Z"


async def test_a_terminal_gets_a_table_with_escaped_server_text(
    manager: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for the whole escaped error text
    await seed(manager)
    out = Terminal()
    code, _, _ = await run(manager, ["list", "--limit", "3"], out)
    assert code == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["CREATED", "ID", "STATUS", "PRODUCT", "ERROR"]
    assert len(lines) == 4
    assert "\x1b" not in out.getvalue()
    assert "\u202e" not in out.getvalue()
    assert "\\x1b[2J\\x1b]0;owned\\x07 \\u202eevil" in lines[1]
    assert record(49, "failed").id in lines[1]
    assert "failed" in lines[1]
    assert record(48, "completed").id in lines[2]


async def test_limit_follows_pages_and_json_forces_lines(manager: InProcess) -> None:
    await seed(manager)
    out = Terminal()
    code, _, transport = await run(manager, ["list", "--all", "--json"], out)
    assert code == 0
    assert len(out.getvalue().splitlines()) == 50
    assert len(transport.requests) == 3  # pages of the server's default 20
    piped = io.StringIO()
    await run(manager, ["list", "--limit", "25"], piped)
    assert len(piped.getvalue().splitlines()) == 25


async def test_errors_are_exit_codes_with_escaped_messages(manager: InProcess) -> None:
    out = io.StringIO()
    code, err, _ = await run(manager, ["list", "--status", "done"], out)
    assert code == 2
    assert "FET-0405" in err
    assert "status must be one or more of" in err
    assert jobs_command(["nope"], ENV, io.StringIO(), io.StringIO()) == 2
    assert jobs_command([], ENV, io.StringIO(), io.StringIO()) == 2


def test_durations_become_instants_and_other_text_passes() -> None:
    assert parse_moment("1h", NOW) == "2026-03-01T00:00:00.000Z"
    assert parse_moment("2d", NOW) == (NOW - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert parse_moment("2026-02-01", NOW) == "2026-02-01"
    assert parse_moment("yesterday", NOW) == "yesterday"  # refused before, by moment_text
