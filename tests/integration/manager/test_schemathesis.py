"""Schemathesis against a real embedded Manager: ``/openapi.json`` must describe the API (§2.10).

The test starts ``fetcher run`` (embedded mode, SQLite store and local objects in a temp dir) on
a free loopback port, runs the schemathesis CLI over every operation with every check
(``[checks] enabled = true``), a fixed seed and a bounded example count, and asserts exit code 0.
It needs no external service, so a missing schemathesis or a server that does not start FAILS.

Every check runs on every operation except where the contract deliberately says something a JSON
Schema cannot express. Those exceptions, each scoped to the operations it concerns, are in
``CONFIG`` below with the reason next to them:

* ``positive_data_acceptance`` (ST202: a schema-valid request must not get a 4xx other than
  401/403/404/409/429) is off for
  - ``POST /v1/management/connections`` and ``PATCH …/{id}``: §2.1 rejects ``5432.0`` as a port
    ("a JSON number with a fraction part or an exponent is not an integer"), while to JSON Schema
    ``5432.0`` *is* the integer 5432 and schemathesis deliberately sends whole floats for
    integers. PATCH also merges the body into the stored record (§2.6.5), so whether a valid
    body passes depends on the stored type (ORACLE needs ``metadata.serviceName``, ``schema``
    only for three types, TLS vocabularies per type).
  - ``POST /v1/fetcher``: every datasource must resolve to a connection owned by
    ``metadata.source`` and pass a live test (§3.6 steps 14-14b), and limit overrides lower the
    counts; the same whole-float rule applies to ``limits``.
  - ``POST …/validate-schema``: when none of the datasources resolve → ``400 FET-1062`` (§2.6.9).
  - ``GET /v1/management/connections`` and ``…/unassigned``: cross-parameter rules
    (``page × limit`` > 2^31 → FET-0405, ``endDate`` < ``startDate`` → FET-0409, §2.6.2).
  - ``GET /v1/fetcher``: a ``cursor`` is valid only as the list issued it (an HMAC over the
    tenant and filters, issue 21), and ``createdTo`` before ``createdFrom`` → FET-0409.
  - ``GET /readyz/tenant/{id}``: always ``400 FET-1080`` in single-tenant mode (§2.10).
* ``not_a_server_error`` on ``GET …/{id}/schema`` also expects ``502``: a datasource that cannot
  be reached or discovered is ``502 FET-1041``/``FET-1042`` by contract (§2.6.8), and the stateful
  phase creates connections to hosts that do not exist.
* ``GET /v1/events``: ``wait`` is fixed to ``0``. It is a long-poll (§2.12): each generated
  ``wait`` of up to 30 s would hold the run for that long while no event exists.
* The coverage phase (a deterministic sweep of boundary values) is skipped for the two largest
  bodies, ``POST /v1/management/connections`` and ``POST /v1/fetcher``, to keep the run near a
  minute: their sweep alone takes about 70 s. Both are still fuzzed (positive and negative) and
  exercised by the stateful phase. Set ``FETCHER_SCHEMATHESIS_FULL=1`` to sweep them too.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ENC_KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
SEED = 20260713
MAX_EXAMPLES = 15
RUN_TIMEOUT_SECONDS = 420
STARTUP_TIMEOUT_SECONDS = 30

_LIMITED_SWEEP = """
# Coverage sweep skipped for the two largest bodies (module docstring).
[[operations]]
include-name = ["POST /v1/management/connections", "POST /v1/fetcher"]
phases.coverage.enabled = false
"""

CONFIG = """
[checks]
enabled = true

# Long-poll: a generated wait would hold the run while no event exists (§2.12).
[[operations]]
include-name = "GET /v1/events"
parameters = { "query.wait" = "0" }

# Schema-valid but rejected by rules a JSON Schema cannot express (module docstring).
[[operations]]
include-name = [
    "POST /v1/management/connections",
    "PATCH /v1/management/connections/{id}",
    "POST /v1/management/connections/validate-schema",
    "POST /v1/fetcher",
    "GET /v1/management/connections",
    "GET /v1/management/connections/unassigned",
    "GET /v1/fetcher",
    "GET /readyz/tenant/{id}",
]
checks.positive_data_acceptance.enabled = false

# 502 FET-1041/FET-1042 is the contract's answer for an unreachable datasource (§2.6.8).
[[operations]]
include-name = "GET /v1/management/connections/{id}/schema"
checks.not_a_server_error.expected-statuses = ["1xx", "2xx", "3xx", "4xx", "502"]
"""


def _bin(name: str) -> Path:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable}", pytrace=False)
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=1) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server this test started, by its PID only."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[str]:
    """An embedded ``fetcher run`` on a free loopback port; yields its base URL."""
    port = _free_port()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "FETCHER_MODE": "embedded",
        "APP_ENC_KEY": ENC_KEY,
        "SERVER_ADDRESS": f"127.0.0.1:{port}",
        "LOG_LEVEL": "error",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'meta.db'}",
        "OBJECT_STORAGE_LOCAL_DIR": str(tmp_path / "objects"),
        "READYZ_DRAIN_DELAY_SEC": "1",
    }
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(  # noqa: S603
            [str(_bin("fetcher")), "run"],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while not _healthy(base):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"the embedded Manager did not start:\n{log_path.read_text()}", pytrace=False
                )
            time.sleep(0.2)
        yield base
    finally:
        _stop(process)


def test_openapi_document_passes_schemathesis(manager: str, tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    full = os.environ.get("FETCHER_SCHEMATHESIS_FULL") == "1"
    config.write_text(CONFIG if full else CONFIG + _LIMITED_SWEEP)
    command = [
        str(_bin("schemathesis")),
        "--config-file",
        str(config),
        "run",
        f"{manager}/openapi.json",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--generation-database",
        "none",
        "--workers",
        "1",
        "--no-color",
    ]
    try:
        result = subprocess.run(  # noqa: S603
            command,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"schemathesis did not finish in {RUN_TIMEOUT_SECONDS} s:\n{exc.stdout!r}")
    report = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, report
    summary = [
        line.strip()
        for line in result.stdout.splitlines()
        if line.startswith("=") or " generated, " in line
    ]
    print("\n".join(summary[-2:]) if summary else report)
