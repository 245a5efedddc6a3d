"""The image's HEALTHCHECK command (deploy/container/fetcher-healthcheck) picks the port of the
mode (the Worker's HEALTH_PORT, else SERVER_ADDRESS's) and passes only on 200 from /health.
A loopback HTTP server stands in for Fetcher here; tests/deploy/test_image.py runs the command
against a real embedded Fetcher inside the image."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.deploy.layout import ROOT

HEALTHCHECK = ROOT / "deploy" / "container" / "fetcher-healthcheck"


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    _Health.status = 200


def _check(env: dict[str, str]) -> int:
    return subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [sys.executable, str(HEALTHCHECK)], env=env, capture_output=True, timeout=30, check=False
    ).returncode


def test_each_mode_uses_its_port(server: ThreadingHTTPServer) -> None:
    port = str(server.server_address[1])
    assert _check({"FETCHER_MODE": "worker", "HEALTH_PORT": port}) == 0
    assert _check({"FETCHER_MODE": "manager", "SERVER_ADDRESS": f":{port}"}) == 0
    assert _check({"FETCHER_MODE": "embedded", "SERVER_ADDRESS": f"127.0.0.1:{port}"}) == 0
    # the other mode's variable is ignored
    assert _check({"FETCHER_MODE": "worker", "SERVER_ADDRESS": f":{port}", "HEALTH_PORT": "1"})
    assert _check({"FETCHER_MODE": "manager", "HEALTH_PORT": port, "SERVER_ADDRESS": ":1"})


def test_only_200_is_healthy(server: ThreadingHTTPServer) -> None:
    _Health.status = 503
    port = str(server.server_address[1])
    assert _check({"FETCHER_MODE": "worker", "HEALTH_PORT": port}) == 1
