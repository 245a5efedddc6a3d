"""Swagger UI with ``AUTH_MODE=jwt`` (§2.10, §12.1): in headless Chromium, offline, the
``/docs`` page of a protected process renders its Authorize button (built from the bearer
scheme of ``/openapi.json``) and a lock on exactly the guarded operations; the operational
ones have none. With ``AUTH_MODE=none`` there is no Authorize button at all."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.e2e.browser import chromium, headless
from tests.e2e.conftest import E2E
from tests.e2e.harness import embedded_fetcher
from tests.fakes.jwks_harness import SECRET_B64
from tests.fakes.jwks_server import ISSUER

pytestmark = E2E

AUTHORIZE = re.compile(r'<button class="btn authorize[^"]*"')
#: One operation block, up to the next one: its path and whether it carries a lock button.
BLOCK = re.compile(
    r'class="opblock opblock-[a-z]+[^"]*" id="operations-(.*?)(?=class="opblock opblock-|\Z)',
    re.S,
)
LOCK = 'class="authorization__btn'
PATH = re.compile(r'data-path="([^"]+)"')


async def _dom(tmp_path: Path, **env: str) -> tuple[str, dict[str, object]]:
    binary = chromium()
    async with (
        embedded_fetcher(tmp_path, **env) as process,
        httpx.AsyncClient(timeout=30.0) as client,
    ):
        document = (await client.get(f"{process.base_url}/openapi.json")).json()
        dom = await headless(binary, tmp_path / "profile", "--dump-dom", f"{process.base_url}/docs")
    return dom, document


async def test_authorize_button_and_locks_with_jwt(tmp_path: Path) -> None:
    env = {"AUTH_MODE": "jwt", "AUTH_ISSUER": ISSUER, "AUTH_JWT_SECRET": SECRET_B64}
    dom, document = await _dom(tmp_path, **env)
    assert AUTHORIZE.search(dom), dom[-2000:]
    locked: set[str] = set()
    open_paths: set[str] = set()
    for block in BLOCK.findall(dom):
        path = PATH.search(block)
        assert path is not None
        (locked if LOCK in block else open_paths).add(path.group(1))
    paths = document["paths"]
    assert isinstance(paths, dict)
    guarded = {p for p, ops in paths.items() if any("security" in op for op in ops.values())}
    assert guarded, "the document declares no security"
    assert locked == guarded
    assert open_paths == set(paths) - guarded
    assert "/health" in open_paths


async def test_no_authorize_button_without_authentication(tmp_path: Path) -> None:
    dom, _ = await _dom(tmp_path)
    assert 'class="opblock opblock-' in dom  # the page did render
    assert not AUTHORIZE.search(dom)
    assert LOCK not in dom
