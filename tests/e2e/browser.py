"""Headless Chromium for the browser tests (``/docs``, ``/console``), cut off from the network.

* :func:`chromium` / :func:`chromedriver`: Debian's ``chromium`` and ``chromium-driver``,
  installed through ``scripts/system-packages.sh`` when missing; skipped with the reason only
  where they cannot be installed (not root, no apt-get), failed under
  ``FETCHER_REQUIRE_SERVICES=1``.
* :func:`headless`: one run of headless Chromium (``--dump-dom``, ``--screenshot``).
* :data:`OFFLINE_FLAGS`: every connection other than to 127.0.0.1 fails (names resolve to
  nothing, a proxied request meets a closed port).
* :class:`WebDriver`: the few W3C WebDriver commands the console tests use, spoken to
  ``chromedriver`` over HTTP with httpx (no Selenium dependency). ``chromedriver`` listens on a
  free loopback port and is stopped by PID.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.harness import HarnessError, free_port
from tests.services import services_required

__all__ = ["OFFLINE_FLAGS", "WebDriver", "chromedriver", "chromium", "headless", "web_driver"]

SYSTEM_PACKAGES = Path(__file__).resolve().parents[2] / "scripts" / "system-packages.sh"
#: Everything but loopback is unreachable: no name resolves, and a request that would use a
#: proxy meets a closed port (loopback is never proxied).
OFFLINE_FLAGS = (
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
)
#: Long enough for Swagger UI to fetch /openapi.json and render (virtual time: it ends early
#: once the page is idle).
RENDER_BUDGET_MS = "20000"
#: The W3C key of an element reference.
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def _system_binary(name: str) -> str:
    """``name`` on PATH, installed through scripts/system-packages.sh when missing."""
    found = shutil.which(name)
    if found is None:
        setup = subprocess.run(  # noqa: S603 - the project's own set-up script
            [str(SYSTEM_PACKAGES)], capture_output=True, text=True, timeout=900, check=False
        )
        found = shutil.which(name)
        if found is None:
            reason = (setup.stderr.strip() or f"exit code {setup.returncode}")[-300:]
            message = f"headless Chromium ({name}) cannot be installed here: {reason}"
            if services_required():
                pytest.fail(message, pytrace=False)
            pytest.skip(message)
    return found


def chromium() -> str:
    """The Chromium binary."""
    return _system_binary("chromium")


def chromedriver() -> str:
    """The chromedriver binary (Debian's ``chromium-driver``, same version as Chromium)."""
    return _system_binary("chromedriver")


async def headless(binary: str, profile: Path, *args: str) -> str:
    """Run headless Chromium with the network cut off; its stdout (``--dump-dom``)."""
    argv = [
        binary,
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for the sandbox
        "--disable-gpu",
        f"--user-data-dir={profile}",
        *OFFLINE_FLAGS,
        f"--virtual-time-budget={RENDER_BUDGET_MS}",
        *args,
    ]
    done = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@dataclass
class WebDriver:
    """One WebDriver session of headless, offline Chromium."""

    http: httpx.AsyncClient
    session: str

    async def command(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = await self.http.request(method, f"/session/{self.session}{path}", json=body)
        value = response.json()["value"]
        if response.status_code != 200:
            raise HarnessError(f"WebDriver {method} {path}: {value}")
        return value

    async def open(self, url: str) -> None:
        await self.command("POST", "/url", {"url": url})

    async def reload(self) -> None:
        await self.command("POST", "/refresh", {})

    async def script(self, source: str, *args: Any) -> Any:
        """Run ``source`` (a function body; ``arguments`` holds ``args``) in the page."""
        return await self.command("POST", "/execute/sync", {"script": source, "args": list(args)})

    async def find_all(self, css: str) -> list[str]:
        found = await self.command("POST", "/elements", {"using": "css selector", "value": css})
        return [element[ELEMENT] for element in found]

    async def wait_for(self, css: str, *, text: str = "", within: float = 20.0) -> str:
        """The first element matching ``css`` whose visible text contains ``text``."""
        deadline = time.monotonic() + within
        while True:
            for element in await self.find_all(css):
                if text in await self.text(element):
                    return element
            if time.monotonic() > deadline:
                body = await self.script("return document.body.innerText")
                raise HarnessError(f"no {css!r} with text {text!r} after {within}s: {body[:2000]}")
            await asyncio.sleep(0.2)

    async def text(self, element: str) -> str:
        value: str = await self.command("GET", f"/element/{element}/text")
        return value

    async def click(self, element: str) -> None:
        await self.command("POST", f"/element/{element}/click", {})

    async def type(self, element: str, value: str) -> None:
        await self.command("POST", f"/element/{element}/value", {"text": value})

    async def log(self, kind: str) -> list[dict[str, Any]]:
        """chromedriver's ``browser`` (console, CSP reports) or ``performance`` log."""
        entries: list[dict[str, Any]] = await self.command("POST", "/se/log", {"type": kind})
        return entries

    async def alert_text(self) -> str | None:
        """The text of an open ``alert()``, or ``None``."""
        response = await self.http.get(f"/session/{self.session}/alert/text")
        return str(response.json()["value"]) if response.status_code == 200 else None

    async def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(await self.command("GET", "/screenshot")))


@contextlib.asynccontextmanager
async def web_driver(
    profile: Path, *, width: int = 1280, height: int = 900
) -> AsyncIterator[WebDriver]:
    """A chromedriver process on a free loopback port and one offline Chromium session."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        chromedriver(),
        f"--port={port}",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    options = {
        "binary": chromium(),
        "args": [
            "--headless=new",
            "--no-sandbox",  # root in a container has no user namespace for the sandbox
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            *OFFLINE_FLAGS,
        ],
    }
    capabilities = {
        "browserName": "chrome",
        "goog:chromeOptions": options,
        "goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"},
    }
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            session = await _new_session(http, {"capabilities": {"alwaysMatch": capabilities}})
            driver = WebDriver(http, session)
            try:
                yield driver
            finally:
                await http.delete(f"/session/{session}")
    finally:
        process.terminate()  # by its PID, like every process a test starts
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except TimeoutError:
            process.kill()
            await process.wait()


async def _new_session(http: httpx.AsyncClient, body: dict[str, Any]) -> str:
    deadline = time.monotonic() + 20
    while True:
        try:
            response = await http.post("/session", json=body)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
    value = response.json()["value"]
    if response.status_code != 200:
        raise HarnessError(f"WebDriver new session: {value}")
    session: str = value["sessionId"]
    return session
