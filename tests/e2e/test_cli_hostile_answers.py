"""Issue 24 through the installed command line (``.venv/bin/fetcher``, a real subprocess)
against a hostile HTTP server on loopback (:mod:`tests.fakes.hostile_http`):

* every field ``events tail`` prints from a feed (``ce-time``, ``job_id``/``ce-subject``,
  ``result.path``, ``error``) and every server text ``result get`` writes reaches the terminal
  escaped — no ESC, BEL, C1 or bidi character, in plain and ``--json`` output;
* a 300 MB feed page (a 300 MB ``next``) and a 300 MB job answer end in one error line and
  exit 2, with the CLI's peak RSS (``ru_maxrss`` of that very child, from ``wait4``) far below
  the answer: the unbounded build reached 1.2 GB and 830 MB and ended in tracebacks;
* a forged ``completed`` event (all-zero ``hmac``, an invented path) is printed flagged as
  unverified, ``--require-verified`` refuses it (exit 2, nothing printed), a bad
  ``x-message-signature`` is flagged ``bad signature``, a correctly signed item is verified;
* ``result get`` never writes a file whose HMAC does not verify.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fetcher.consumer import ConsumerKeys
from fetcher.crypto import sign_message
from tests.e2e.harness import FETCHER_BIN
from tests.fakes.hostile_http import MIB, Answer, HostileHttpServer, streamed_json
from tests.terminal import read_terminal
from tests.unit.consumer.conftest import (
    EXCHANGE,
    MASTER_KEY,
    ce_headers,
    completed_body,
    document_bytes,
    store_document,
)

pytestmark = pytest.mark.integration

KEYS = ConsumerKeys.from_master(MASTER_KEY)
JOB_ID = "0190a1b2-0000-7000-8000-0000000000aa"
#: What a terminal acts on or reorders: C0 (tab and newline excepted in a whole document), DEL,
#: C1, the bidi controls and the line/paragraph separators.
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
HOSTILE_TIME = "2026\x1b]0;PWNED\x07\x1b[2J\x1b[31mFAKE OK\x1b[0m"
HOSTILE_JOB = "job\x1b[2K\u202egpj.exe\x9b31m"
HOSTILE_PATH = "external-data/\x1b]52;c;cm0gLXJmIH4=\x07x\u2066.json\x7f"
HOSTILE_ERROR = "boom\x1b[1A\x1b[2K\u202ekO\x9b\x85line"
#: Far below the 300 MB answers; the unbounded build peaked at 1.2 GB and 830 MB.
RSS_BOUND = 160 * MIB
HUGE = 300 * 1000 * 1000


@dataclass(frozen=True)
class Run:
    code: int
    stdout: bytes
    stderr: str
    peak_rss: int


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    assert KEYS.storage is not None
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "FETCHER_EXTERNAL_KEY": KEYS.external_hmac.hex(),
        "FETCHER_STORAGE_KEY": KEYS.storage.hex(),
        "OBJECT_STORAGE_LOCAL_DIR": str(tmp_path / "objects"),
        **extra,
    }


#: Spawns ``argv[2:]``, reaps it with ``wait4`` and writes its ``ru_maxrss`` (KiB) to
#: ``argv[1]``. A process's peak RSS includes what it had before ``exec``: a CLI forked straight
#: from pytest (hundreds of MiB late in a full run) would report pytest's size, so the CLI is
#: spawned from this small interpreter instead.
_MEASURE = """
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as report:
    report.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def fetcher(env: dict[str, str], *args: str, timeout: float = 60) -> Run:
    """Run ``fetcher args…`` and read its own peak RSS (``ru_maxrss`` from ``wait4``)."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as scratch,
    ):
        report = Path(scratch) / "maxrss"
        process = subprocess.Popen(  # noqa: S603 - our own console script, fixed argv
            [sys.executable, "-c", _MEASURE, str(report), FETCHER_BIN, *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # a timeout ends the CLI with its launcher
        )
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"fetcher {args[:2]} did not finish in {timeout} s")
        out.seek(0)
        err.seek(0)
        return Run(code, out.read(), err.read().decode(), int(report.read_text()) * 1024)


def feed_item(cursor: int, body: bytes, **headers: str) -> dict[str, Any]:
    """A §2.12 feed item of the event ``body``, its §8.4 headers overridden by ``headers``."""
    data = json.loads(body)
    status = data["status"]
    return {
        "cursor": str(cursor),
        "routingKey": f"job.{status}",
        "headers": {**ce_headers(status, data["job_id"]), **headers},
        "data": data,
        "createdAt": "2026-12-04T10:00:00.000Z",
    }


def page(*items: dict[str, Any]) -> Answer:
    return Answer.json({"items": list(items), "next": items[-1]["cursor"] if items else "0"})


def assert_terminal_safe(text: str) -> None:
    found = UNSAFE.findall(text)
    assert not found, f"unescaped {found!r} in {text!r}"


def assert_one_error_line(run: Run, *fragments: str) -> None:
    assert run.code == 2, run.stderr
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if line]
    assert len(lines) == 1, run.stderr
    for fragment in fragments:
        assert fragment in lines[0], run.stderr
    assert_terminal_safe(run.stderr)


# --- 1. terminal escapes -------------------------------------------------------------------


def hostile_feed() -> Answer:
    completed = completed_body(HOSTILE_PATH, "00" * 32, 10, 3, job_id=HOSTILE_JOB)
    failed = {
        "job_id": HOSTILE_JOB,
        "status": "failed",
        "metadata": {"source": "payments", "error": {"message": HOSTILE_ERROR}},
    }
    return page(
        feed_item(1, completed, **{"ce-time": HOSTILE_TIME}),
        feed_item(2, json.dumps(failed).encode(), **{"ce-time": HOSTILE_TIME}),
    )


def test_events_tail_plain_escapes_every_field_and_flags_what_it_cannot_trust(
    tmp_path: Path,
) -> None:
    with HostileHttpServer({"/v1/events": hostile_feed()}) as server:
        run = fetcher(
            cli_env(tmp_path),
            "events",
            "tail",
            "--from-start",
            "--feed",
            server.url,
            "--count",
            "2",
        )
    assert run.code == 0, run.stderr
    text = run.stdout.decode()
    assert_terminal_safe(text)
    time_shown = "2026\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mFAKE OK\\x1b[0m"
    job_shown = "job\\x1b[2K\\u202egpj.exe\\x9b31m"
    path_shown = "external-data/\\x1b]52;c;cm0gLXJmIH4=\\x07x\\u2066.json\\x7f"
    flags = "[unverified: unsigned feed] [job_id is not a UUID]"
    assert text.splitlines() == [
        f"{time_shown} completed {job_shown} rows=3 bytes=10 path={path_shown} {flags}",
        f'{time_shown} failed {job_shown} error="boom\\u001b[1A\\u001b[2K\\u202ekO\\u009b'
        f'\\u0085line" {flags}',
    ]


def test_events_tail_json_is_terminal_safe_and_decodes_to_the_server_values(
    tmp_path: Path,
) -> None:
    with HostileHttpServer({"/v1/events": hostile_feed()}) as server:
        env = cli_env(tmp_path)
        run = fetcher(
            env, "events", "tail", "--from-start", "--feed", server.url, "--count", "2", "--json"
        )
    assert run.code == 0, run.stderr
    assert_terminal_safe(run.stdout.decode())
    completed, failed = (json.loads(line) for line in run.stdout.decode().splitlines())
    assert completed["ce_time"] == HOSTILE_TIME
    assert completed["data"]["job_id"] == HOSTILE_JOB
    assert completed["data"]["result"]["path"] == HOSTILE_PATH
    assert failed["data"]["metadata"]["error"]["message"] == HOSTILE_ERROR
    for event in (completed, failed):
        assert event["verified"] is False
        assert event["unverified"] == "unsigned feed"
        assert event["job_id_is_uuid"] is False


def test_rejections_and_errors_from_the_server_are_escaped(tmp_path: Path) -> None:
    """A feed item that fails its checks is reported on stderr, its cursor escaped; an error
    answer's message reaches the one error line escaped."""
    bad = feed_item(1, completed_body("p", "00" * 32, 1, 1))
    bad["cursor"] = "1\x1b[2J"
    bad["headers"]["ce-tenantid"] = "other\x1b]0;x\x07"
    error = Answer.json({"code": "FET-0002", "title": "x", "message": "no\x1b[2J\u202ewhere"}, 500)
    rejected_page = Answer.json({"items": [bad], "next": "1"})
    with HostileHttpServer({"/v1/events": rejected_page}) as server:
        env = cli_env(tmp_path)
        first = subprocess.Popen(  # noqa: S603 - our own console script, fixed argv
            [FETCHER_BIN, "events", "tail", "--from-start", "--feed", server.url, "--count", "1"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while server.requests.count("/v1/events") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # the rejected item was handled: the next page is being read
        first.terminate()
        _, err = first.communicate(timeout=30)
        server.routes["/v1/events"] = error
        failed = fetcher(env, "events", "tail", "--from-start", "--feed", server.url)
    assert "rejected cursor 1\\x1b[2J:" in err.decode()
    assert_terminal_safe(err.decode())
    assert_one_error_line(failed, "no\\x1b[2J\\u202ewhere")


# --- 2. bounded reads ----------------------------------------------------------------------


def test_a_300_mb_feed_page_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    huge_next = streamed_json(b'{"items":[],"next":"', b"9", HUGE, b'"}')
    with HostileHttpServer({"/v1/events": huge_next}) as server:
        run = fetcher(cli_env(tmp_path), "events", "tail", "--from-start", "--feed", server.url)
    assert_one_error_line(run, "exceeds 16777216 bytes")
    assert run.peak_rss < RSS_BOUND, f"peak RSS {run.peak_rss / MIB:.0f} MiB"


def test_a_feed_page_with_a_next_that_is_no_cursor_is_refused(tmp_path: Path) -> None:
    with HostileHttpServer({"/v1/events": Answer.json({"items": [], "next": "1/../x"})}) as srv:
        run = fetcher(cli_env(tmp_path), "events", "tail", "--from-start", "--feed", srv.url)
    assert_one_error_line(run, "next cursor that is not 1-18 digits")


def test_a_300_mb_job_answer_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    huge = streamed_json(b'{"status":"completed","resultPath":"', b"a", HUGE, b'"}')
    with HostileHttpServer({f"/v1/fetcher/{JOB_ID}": huge}) as server:
        run = fetcher(cli_env(tmp_path), "result", "get", JOB_ID, "--api", server.url)
    assert_one_error_line(run, "exceeds 8388608 bytes")
    assert run.peak_rss < RSS_BOUND, f"peak RSS {run.peak_rss / MIB:.0f} MiB"


def job_answer(status: str) -> dict[str, str]:
    """A job answer (§4.6's required text keys) with the server's ``status``."""
    return {"id": JOB_ID, "status": status, "createdAt": "2026-12-04T10:00:00.000Z"}


@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        (Answer([b"{not json"]), "is not JSON"),
        (Answer.json(["a", "list"]), "the job answer is not a JSON object"),
        (Answer.json(job_answer("\x1b]0;PWNED\x07running")), "is \\x1b]0;PWNED\\x07running"),
        (Answer.json(job_answer("r" * 1_000_000)), "… (998062 more characters)"),
    ],
)
def test_an_unusable_job_answer_is_one_escaped_line(
    tmp_path: Path, answer: Answer, fragment: str
) -> None:
    with HostileHttpServer({f"/v1/fetcher/{JOB_ID}": answer}) as server:
        run = fetcher(cli_env(tmp_path), "result", "get", JOB_ID, "--api", server.url)
    assert_one_error_line(run, fragment)


def test_an_object_over_max_object_bytes_is_not_read_further(tmp_path: Path) -> None:
    plain = document_bytes({"pg": {"t": [{"a": "x" * 4000}]}})
    key, mac = store_document(tmp_path / "objects", KEYS, plain)
    env = cli_env(tmp_path)
    run = fetcher(env, "result", "get", key, "--hmac", mac, "--max-object-bytes", "1000")
    assert_one_error_line(run, "exceeds 1000 bytes (--max-object-bytes)")
    assert run.stdout == b""


def test_the_help_names_the_read_limits_and_what_is_verified(tmp_path: Path) -> None:
    tail = fetcher(cli_env(tmp_path), "events", "tail", "--help").stdout.decode()
    get = fetcher(cli_env(tmp_path), "result", "get", "--help").stdout.decode()
    for needed in ("--max-page-bytes", "16777216", "--require-verified"):
        assert needed in tail
    for needed in ("--max-answer-bytes", "8388608", "--max-object-bytes", "357913980"):
        assert needed in get
    assert "nothing is written unless the object's HMAC verifies" in " ".join(get.split())


# --- 3. unverified events, unverified results ----------------------------------------------


def forged() -> bytes:
    """A ``completed`` event nobody signed: an all-zero hmac and an invented path."""
    return completed_body("external-data/invented.json", "0" * 64, 1, 1)


def test_a_forged_event_is_flagged_and_require_verified_refuses_it(tmp_path: Path) -> None:
    with HostileHttpServer({"/v1/events": page(feed_item(7, forged()))}) as server:
        env = cli_env(tmp_path)
        shown = fetcher(env, "events", "tail", "--from-start", "--feed", server.url, "--count", "1")
        refused = fetcher(
            env, "events", "tail", "--from-start", "--feed", server.url, "--require-verified"
        )
    assert shown.code == 0, shown.stderr
    assert (
        shown.stdout.decode()
        .rstrip("\n")
        .endswith("path=external-data/invented.json [unverified: unsigned feed]")
    )
    assert refused.stdout == b""
    assert_one_error_line(refused, "cursor 7 is unverified (unsigned feed)", "--require-verified")


def _signed_item(cursor: int, body: bytes, signature: str | None = None) -> dict[str, Any]:
    t = int(time.time())
    real = sign_message(
        KEYS.external_hmac,
        t=t,
        body=body,
        exchange=EXCHANGE,
        routing_key=f"job.{json.loads(body)['status']}",
        tenant="",
    )
    signing = {"t": str(t), "signature-version": "v1", "x-message-signature": signature or real}
    return feed_item(cursor, body, **signing)


def test_feed_items_with_signing_headers_are_verified_or_flagged_bad(tmp_path: Path) -> None:
    good = _signed_item(1, completed_body("external-data/a.json", "ab" * 32, 5, 2, job_id=JOB_ID))
    bad = _signed_item(2, forged(), signature="0" * 64)
    with HostileHttpServer({"/v1/events": page(good, bad)}) as server:
        env = cli_env(tmp_path)
        run = fetcher(
            env, "events", "tail", "--from-start", "--feed", server.url, "--count", "2", "--json"
        )
        strict = fetcher(
            env, "events", "tail", "--from-start", "--feed", server.url, "--require-verified"
        )
    assert run.code == 0, run.stderr
    first, second = (json.loads(line) for line in run.stdout.decode().splitlines())
    assert (first["verified"], "unverified" in first, first["job_id_is_uuid"]) == (
        True,
        False,
        True,
    )
    assert (second["verified"], second["unverified"]) == (False, "bad signature")
    assert strict.stdout.count(b"\n") == 1  # the verified one is printed, then it stops
    assert_one_error_line(strict, "cursor 2 is unverified (bad signature)")


def test_result_get_never_writes_a_result_whose_hmac_does_not_verify(tmp_path: Path) -> None:
    plain = document_bytes({"pg": {"t": [{"a": 1}]}})
    key, _ = store_document(tmp_path / "objects", KEYS, plain)
    job = {**job_answer("completed"), "resultPath": key, "resultHmac": "0" * 64}
    out = tmp_path / "out.json"
    with HostileHttpServer({f"/v1/fetcher/{JOB_ID}": Answer.json(job)}) as server:
        env = cli_env(tmp_path)
        # the job's object is read from the bucket (here a local folder), not the download route
        bucket = ("--api", server.url, "--from-bucket")
        run = fetcher(env, "result", "get", JOB_ID, *bucket, "-o", str(out))
        to_stdout = fetcher(env, "result", "get", JOB_ID, *bucket)
    assert run.code == 3, run.stderr
    assert "result HMAC does not match; nothing was written" in run.stderr
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.json")] == []
    assert (to_stdout.code, to_stdout.stdout) == (3, b"")


def test_result_get_on_a_terminal_escapes_the_document_keeping_its_json(tmp_path: Path) -> None:
    """Verified rows still come from a source the user does not control: on a terminal the
    C1 and bidi characters of a value become JSON escapes; a pipe gets the exact bytes."""
    doc = {"pg": {"t": [{"note": "a\x9b31mb\u202ec\u2066d", "ok": "é"}]}}
    plain = document_bytes(doc)
    key, mac = store_document(tmp_path / "objects", KEYS, plain)
    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(  # noqa: S603 - our own console script, fixed argv
            [FETCHER_BIN, "result", "get", key, "--hmac", mac],
            env=cli_env(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.DEVNULL,
        )
        os.close(slave)
        shown = read_terminal(master, process) or b""
        process.wait(timeout=30)
    finally:
        os.close(master)
    assert process.returncode == 0
    text = shown.decode().replace("\r\n", "\n")
    assert_terminal_safe(text)
    assert "a\\u009b31mb\\u202ec\\u2066d" in text
    assert "é" in text
    assert json.loads(text) == doc
    piped = fetcher(cli_env(tmp_path), "result", "get", key, "--hmac", mac)
    assert piped.stdout == plain
