"""Issue 33, item 4: ``fetcher jobs list`` (the installed CLI, a real subprocess) against a
hostile or broken server on loopback (:mod:`tests.fakes.hostile_http`).

On ``02b8d0d`` 7 of 9 wrong shapes ended in a traceback, ``{"items":{}}`` printed nothing and
exited 0, ``{"items":[1,2]}`` printed ``1`` and ``2``, an empty page with a cursor looped for
ever (673 requests in 30 s), ``--limit 0`` on a terminal grew to 2.5 GiB, a server sending one
byte every 20 s held the command over 100 s, and a 30 MB error message was printed whole. Each
case here is one error line and exit 2 (a bad ``--limit`` is a usage error naming the option,
also exit 2), in bounded time and memory.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import FETCHER_BIN
from tests.e2e.test_cli_hostile_answers import (
    _MEASURE,
    RSS_BOUND,
    Run,
    assert_one_error_line,
    cli_env,
    fetcher,
)
from tests.fakes.hostile_http import MIB, Answer, HostileHttpServer, trickled
from tests.terminal import read_terminal

pytestmark = pytest.mark.integration

LIST = "/v1/fetcher"


def job(n: int) -> dict[str, Any]:
    return {
        "id": f"0190a1b2-0000-7000-8000-{n:012x}",
        "status": "failed",
        "requestHash": "0" * 64,
        "createdAt": "2026-12-04T10:00:00.000Z",
        "metadata": {"source": "payments", "error": "boom " * 40},
    }


def jobs_list(server: HostileHttpServer, tmp_path: Path, *args: str) -> Run:
    env = cli_env(tmp_path)
    return fetcher(env, "jobs", "list", "--api", server.url, *args)


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        ([], "the job list page is not a JSON object"),
        ("items", "the job list page is not a JSON object"),
        ({"nextCursor": None}, "the job list answered a page without an items list"),
        ({"items": {}, "nextCursor": None}, "the job list answered a page without an items list"),
        ({"items": [1, 2], "nextCursor": None}, "item 0: the job answer is not a JSON object"),
        ({"items": [{"id": "x"}], "nextCursor": None}, "item 0: the job answer has no text"),
        ({"items": [job(1), {"id": 5}], "nextCursor": None}, "item 1: the job answer has no"),
        ({"items": []}, "the job list answered a page without nextCursor"),
        ({"items": [], "nextCursor": 7}, "a nextCursor that is not text or null"),
        ({"items": [], "nextCursor": "c" * 5000}, "a nextCursor over 4096 characters"),
    ],
)
def test_every_wrong_shape_is_one_line_and_exit_2(
    tmp_path: Path, answer: Any, fragment: str
) -> None:
    with HostileHttpServer({LIST: Answer.json(answer)}) as server:
        run = jobs_list(server, tmp_path)
    assert_one_error_line(run, fragment)
    assert run.stdout == b""  # nothing of a page is printed before all of it is checked


def test_an_answer_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    with HostileHttpServer({LIST: Answer([b"{not json"])}) as server:
        run = jobs_list(server, tmp_path)
    assert_one_error_line(run, "is not JSON")


def test_empty_pages_with_a_cursor_end_after_three(tmp_path: Path) -> None:
    with HostileHttpServer({LIST: Answer.json({"items": [], "nextCursor": "again"})}) as srv:
        run = jobs_list(srv, tmp_path, "--all")
        asked = srv.requests.count(LIST)
    assert_one_error_line(run, "3 pages in a row with no items and a nextCursor")
    assert asked == 3


def test_a_30_mb_error_message_is_cut(tmp_path: Path) -> None:
    error = {"code": "FET-0002", "title": "Internal", "message": "\x1b[2J" + "m" * 30_000_000}
    with HostileHttpServer({LIST: Answer.json(error, 500)}) as server:
        run = jobs_list(server, tmp_path)
    assert_one_error_line(run, "500 FET-0002 Internal: \\x1b[2Jmmm", "more characters)")
    assert len(run.stderr) < 2200


@pytest.mark.parametrize("limit", ["0", "-1", "10001", "99999999999999999999", "ten"])
def test_a_bad_limit_is_a_usage_error_naming_it(tmp_path: Path, limit: str) -> None:
    run = fetcher(
        cli_env(tmp_path), "jobs", "list", "--api", "http://127.0.0.1:9", "--limit", limit
    )
    assert run.code == 2, run.stderr
    assert "argument --limit:" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_server_trickling_one_byte_every_20_s_cannot_outlast_timeout(tmp_path: Path) -> None:
    body = json.dumps({"items": [job(1)], "nextCursor": None}).encode()
    with HostileHttpServer({LIST: trickled(body, 20.0)}) as server:
        started = time.monotonic()
        run = jobs_list(server, tmp_path, "--timeout", "3")
        took = time.monotonic() - started
    assert_one_error_line(run, "no complete answer within --timeout 3 s")
    assert took < 10, f"took {took:.1f} s"


def test_the_default_timeout_is_stated() -> None:
    shown = subprocess.run(  # noqa: S603 - our own console script, fixed argv
        [FETCHER_BIN, "jobs", "list", "--help"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert shown.returncode == 0
    assert "give up after this long for the whole listing (default 60)" in " ".join(
        shown.stdout.split()
    )


def in_terminal(env: dict[str, str], *args: str, timeout: float = 60) -> tuple[int, str, int]:
    """``fetcher args…`` with a terminal as stdout: exit code, what the terminal showed, and
    the CLI's peak RSS (``wait4``, as :func:`fetcher` measures it)."""
    master, slave = pty.openpty()
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "maxrss"
        process = subprocess.Popen(  # noqa: S603 - our own console script, fixed argv
            [sys.executable, "-c", _MEASURE, str(report), FETCHER_BIN, *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        try:
            shown = read_terminal(master, process, timeout=timeout)
            if shown is None:
                os.killpg(process.pid, signal.SIGKILL)
                pytest.fail(f"fetcher {args[:2]} did not finish in {timeout} s")
            code = process.wait(30)
        finally:
            os.close(master)
        return code, shown.decode(errors="replace"), int(report.read_text()) * 1024


def test_all_on_a_terminal_streams_in_bounded_memory_until_the_timeout(tmp_path: Path) -> None:
    """A server that answers the same full page for ever: the table is written as pages come
    (nothing is held for column widths), and ``--timeout`` ends it."""
    endless = Answer.json({"items": [job(n) for n in range(100)], "nextCursor": "more"})
    with HostileHttpServer({LIST: endless}) as server:
        env = cli_env(tmp_path, COLUMNS="100")
        code, shown, peak = in_terminal(
            env, "jobs", "list", "--api", server.url, "--all", "--timeout", "8"
        )
        asked = server.requests.count(LIST)
    assert code == 2
    assert "no complete answer within --timeout 8 s" in shown
    assert asked > 10, asked  # it kept listing until the deadline
    assert peak < RSS_BOUND, f"peak RSS {peak / MIB:.0f} MiB"
    lines = shown.replace("\r\n", "\n").splitlines()
    assert lines[0].split() == ["CREATED", "ID", "STATUS", "PRODUCT", "ERROR"]
    rows = [line for line in lines[1:-1] if line.startswith("2026-12-04 10:00:00Z")]
    assert len(rows) > 1000
    assert max(len(line) for line in lines) <= 100  # COLUMNS=100
