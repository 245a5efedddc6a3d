"""§13 at the HTTP edge, attacked the way issue 7 reproduced it: through a running
``fetcher run`` (embedded mode: one real process, SQLite store, no other server needed).

* Cross-site requests: a body with no ``Content-Type`` (what a browser sends for a Blob) and a
  foreign ``Host`` → ``415 FET-0009``, and nothing is stored (§2.1).
* Bounded metrics: 2,000 requests with random method names (and random paths) leave at most
  eight ``method`` values on ``/metrics``, and ``/metrics`` stays small (§2.11).
* ``HTTP_MAX_CONNECTIONS``: while that many requests are in flight, a further one gets
  ``503 FET-0003`` at once; it is never queued (§9.1, §13).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.e2e.harness import FETCHER_BIN, MASTER_KEY, free_port

#: §2.11: the ``method`` label values.
METHOD_LABELS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
STARTUP_SECONDS = 60.0
JSON = {"Content-Type": "application/json"}
JOB_BODY = (
    b'{"dataRequest":{"mappedFields":{"local_src":{"accounts":["id"]}}},'
    b'"metadata":{"source":"payments"}}'
)


@dataclass
class Embedded:
    """One embedded ``fetcher run`` on a loopback port."""

    process: subprocess.Popen[bytes]
    base_url: str
    port: int
    store: Path
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def stored_jobs(self) -> int:
        """Rows in the metadata store's job table, read straight from the SQLite file."""
        with contextlib.closing(sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)) as db:
            count: int = db.execute("SELECT count(*) FROM jobs").fetchone()[0]
            return count


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=1) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def embedded_process(workdir: Path, **overrides: str) -> Iterator[Embedded]:
    """Start an embedded process with an internal SQLite datasource ``local_src``; stop it
    by its PID at the end."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "source.db"
    with contextlib.closing(sqlite3.connect(source)) as db:
        db.execute("CREATE TABLE IF NOT EXISTS accounts (id INTEGER PRIMARY KEY)")
        db.commit()
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(workdir),
        "FETCHER_MODE": "embedded",
        "APP_ENC_KEY": MASTER_KEY,
        "SERVER_ADDRESS": f"127.0.0.1:{port}",
        "LOG_LEVEL": "warn",
        "DATABASE_URL": f"sqlite:///{workdir / 'meta.db'}",
        "OBJECT_STORAGE_LOCAL_DIR": str(workdir / "objects"),
        "READYZ_DRAIN_DELAY_SEC": "1",
        "DATASOURCE_LOCAL_CONFIG_NAME": "local_src",
        "DATASOURCE_LOCAL_TYPE": "sqlite",
        "DATASOURCE_LOCAL_DATABASE": str(source),
        **overrides,
    }
    log = workdir / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - our own console script, fixed argv
            [FETCHER_BIN, "run"],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    running = Embedded(process, f"http://127.0.0.1:{port}", port, workdir / "meta.db", log)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _healthy(running.base_url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the embedded process did not start:\n{running.log_tail()}")
            time.sleep(0.1)
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    with embedded_process(tmp_path_factory.mktemp("http-edge")) as running:
        yield running


def _assert_error(response: httpx.Response, status: int, code: str, title: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert (body["code"], body["title"]) == (code, title), body
    message: str = body["message"]
    return message


# --- cross-site requests ------------------------------------------------------------------


async def test_a_blob_body_without_content_type_from_a_foreign_host_is_415(
    server: Embedded,
) -> None:
    """Issue 7 #7: the request a cross-site page can send without a CORS preflight. Issue 33
    put two checks in front (a foreign ``Host`` → 421, a foreign ``Origin`` → 403); the media
    type check still holds on its own, for a request that passes both."""
    async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as client:
        forged = {"Host": "evil.example", "Origin": "https://evil.example"}
        response = await client.post("/v1/fetcher", content=JOB_BODY, headers=forged)
        _assert_error(response, 421, "FET-0013", "Misdirected Request")
        response = await client.post(
            "/v1/fetcher", content=JOB_BODY, headers={"Origin": "https://evil.example"}
        )
        _assert_error(response, 403, "FET-0014", "Cross-Site Request")
        response = await client.post("/v1/fetcher", content=JOB_BODY)
        _assert_error(response, 415, "FET-0009", "Unsupported Media Type")
        # The other media types a browser may send without a preflight are refused too.
        for simple in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
            response = await client.post(
                "/v1/fetcher", content=JOB_BODY, headers={"Content-Type": simple}
            )
            _assert_error(response, 415, "FET-0009", "Unsupported Media Type")
        assert server.stored_jobs() == 0
        metrics = (await client.get("/metrics")).text
        assert "fetcher_jobs_created_total{" not in metrics

        # The same body with a JSON media type is a job: the 415 above was the media type.
        accepted = await client.post("/v1/fetcher", content=JOB_BODY, headers=JSON)
        assert accepted.status_code == 202, accepted.text
        assert server.stored_jobs() == 1


# --- bounded metrics ----------------------------------------------------------------------

_HTTP_SAMPLE = re.compile(
    r"^fetcher_http_request(?:s_total|_duration_seconds_count)\{(?P<labels>.*)\} \S+$"
)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _label_values(metrics_text: str, label: str) -> set[str]:
    values: set[str] = set()
    for line in metrics_text.splitlines():
        if match := _HTTP_SAMPLE.match(line):
            values |= {v for name, v in _LABEL.findall(match["labels"]) if name == label}
    return values


async def test_random_method_names_leave_at_most_eight_method_labels(server: Embedded) -> None:
    """Issue 7 #3: 2,000 random method names grew ``/metrics`` to 3.9 MB, for good."""
    async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as client:
        before = len((await client.get("/metrics")).content)
        for index in range(2000):
            method = "X" + secrets.token_hex(5).upper()
            path = "/v1/fetcher" if index % 2 else f"/{secrets.token_hex(6)}"
            response = await client.request(method, path)
            assert response.status_code in (404, 405), response.text
        text = (await client.get("/metrics")).text

    methods = _label_values(text, "method")
    assert len(methods) <= 8, sorted(methods)[:20]
    assert methods <= METHOD_LABELS
    assert "other" in methods
    routes = _label_values(text, "route")
    assert routes <= {"unmatched", "/v1/fetcher", "/metrics", "/health"}, routes
    # 403 and 421: the cross-site and Host refusals of the media-type test above.
    statuses = {"200", "202", "403", "404", "405", "415", "421", "other"}
    assert _label_values(text, "status") <= statuses
    assert len(text.encode()) < before + 64 * 1024, len(text)


# --- HTTP_MAX_CONNECTIONS -----------------------------------------------------------------


async def _open_slow_request(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A ``POST /v1/fetcher`` whose headers are complete and whose body never finishes: the
    request is in flight, inside the application, until the client closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/fetcher HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{"
    )
    await writer.drain()
    return reader, writer


async def test_requests_beyond_http_max_connections_get_503_at_once(tmp_path: Path) -> None:
    with embedded_process(tmp_path, HTTP_MAX_CONNECTIONS="2") as limited:
        async with httpx.AsyncClient(base_url=limited.base_url, timeout=10) as client:
            first = await _open_slow_request(limited.port)
            await asyncio.sleep(0.5)
            assert (await client.get("/version")).status_code == 200  # 1 of 2 in flight

            second = await _open_slow_request(limited.port)
            await asyncio.sleep(0.5)
            for _ in range(3):
                started = time.monotonic()
                refused = await client.get("/version")
                elapsed = time.monotonic() - started
                _assert_error(refused, 503, "FET-0003", "Service Unavailable")
                assert refused.headers["retry-after"] == "1"
                assert elapsed < 1.0, f"answered after {elapsed:.2f}s: queued, not refused"

            # The slow requests end (one completes its body, one hangs up): slots are freed.
            first[1].write(b"}" + b" " * 98)
            await first[1].drain()
            assert (await first[0].readuntil(b"\r\n")).startswith(b"HTTP/1.1 400")
            for _, writer in (first, second):  # the second hangs up mid-body
                writer.close()
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()
            deadline = time.monotonic() + 5
            while (await client.get("/version")).status_code != 200:
                assert time.monotonic() < deadline, "in-flight slots were never released"
                await asyncio.sleep(0.1)


def test_an_invalid_http_max_connections_refuses_startup(tmp_path: Path) -> None:
    """§9.3: one ``startup refused`` line, exit 1, no port opened."""
    port = free_port()
    done = subprocess.run(  # noqa: S603 - our own console script, fixed argv
        [FETCHER_BIN, "run"],
        cwd=tmp_path,
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path),
            "FETCHER_MODE": "embedded",
            "APP_ENC_KEY": MASTER_KEY,
            "SERVER_ADDRESS": f"127.0.0.1:{port}",
            "HTTP_MAX_CONNECTIONS": "0",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == "startup refused: invalid value for HTTP_MAX_CONNECTIONS\n"


def test_a_port_in_use_is_one_refusal_line_not_a_traceback(tmp_path: Path) -> None:
    """A second process on a bound port says so in one line and exits 1 (found by running two
    processes on one port: it printed a 26-line traceback)."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(  # noqa: S603 - our own console script, fixed argv
            [FETCHER_BIN, "run"],
            cwd=tmp_path,
            env={
                "PATH": os.environ.get("PATH", ""),
                "HOME": str(tmp_path),
                "FETCHER_MODE": "embedded",
                "APP_ENC_KEY": MASTER_KEY,
                "SERVER_ADDRESS": f"127.0.0.1:{port}",
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert (
        done.stderr
        == f"startup refused: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    )


# --- a bare IPv6 host on a driver that wants brackets ---------------------------------------


#: Each engine whose driver is installed here (SQL Server's pyodbc is not); ORACLE needs its
#: service name.
IPV6_BODIES: dict[str, dict[str, object]] = {
    "MONGODB": {},
    "POSTGRESQL": {"userName": "u", "password": "p"},
    "MYSQL": {"userName": "u", "password": "p"},
    "ORACLE": {"userName": "u", "password": "p", "metadata": {"serviceName": "FREEPDB1"}},
}


@pytest.mark.parametrize("kind", sorted(IPV6_BODIES))
def test_a_connection_on_a_bare_ipv6_host_fails_its_test_cleanly(
    server: Embedded, kind: str
) -> None:
    """§2.5 accepts an IPv6 host without brackets; pymongo refuses one unbracketed, which
    used to surface as ``500 FET-0002`` on ``/test`` and ``/schema`` (found by schemathesis).
    Nothing listens on ``[::1]:<port>``: the test is a ``failure``, the schema a 502."""
    body = {
        "configName": f"v6_{kind.lower()}",
        "type": kind,
        "host": "::1",
        "port": free_port(),
        "databaseName": "ledger",
        **IPV6_BODIES[kind],
    }
    headers = {**JSON, "X-Product-Name": "payments"}
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        created = client.post("/v1/management/connections", json=body, headers=headers)
        assert created.status_code == 201, created.text
        path = f"/v1/management/connections/{created.json()['id']}"
        tested = client.post(f"{path}/test")
        assert tested.status_code == 200, tested.text
        assert tested.json()["status"] == "failure"
        schema = client.get(f"{path}/schema")
        assert schema.status_code == 502, schema.text
        assert schema.json()["code"] == "FET-1041"
    assert "Traceback" not in server.log_tail()
