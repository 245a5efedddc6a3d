"""§2.10 ``GET /docs`` renders with the network cut off, tested as a person would see it.

A running process (embedded mode: no external server needed) is opened in headless Chromium
whose every connection other than to 127.0.0.1 fails: host names resolve to nothing and any
proxied request goes to a closed port. Swagger UI must still render every operation of
``/openapi.json``. Before, ``/docs`` loaded Swagger UI from a public CDN and rendered an empty
white page without internet.

Chromium is Debian's ``chromium`` package; ``scripts/system-packages.sh`` (run by ``make
test``) installs it, and this test runs it once more when the binary is missing. The test is
skipped, with that reason, only where it cannot be installed (not root, no apt-get), and fails
instead under ``FETCHER_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.browser import chromium, headless
from tests.e2e.conftest import E2E
from tests.e2e.harness import embedded_fetcher

pytestmark = E2E

OPERATION = re.compile(r'class="opblock opblock-([a-z]+)[^"]*" id="operations-[^"]+?-([^"]+)"')
PATH = re.compile(r'class="opblock-summary-path" data-path="([^"]+)"')


def rendered_operations(dom: str) -> set[tuple[str, str]]:
    """``(method, operationId)`` of every operation block Swagger UI rendered."""
    return set(OPERATION.findall(dom))


def documented_operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method, operation["operationId"])
        for ops in document["paths"].values()
        for method, operation in ops.items()
    }


async def test_docs_render_every_operation_without_network(tmp_path: Path) -> None:
    binary = chromium()
    async with (
        embedded_fetcher(tmp_path, LOG_LEVEL="info") as process,
        httpx.AsyncClient(timeout=30.0) as client,
    ):
        document = (await client.get(f"{process.base_url}/openapi.json")).json()
        page = (await client.get(f"{process.base_url}/docs")).text
        dom = await headless(binary, tmp_path / "profile", "--dump-dom", f"{process.base_url}/docs")
        screenshot = tmp_path / "docs.png"
        await headless(
            binary,
            tmp_path / "profile-shot",
            "--window-size=1280,1600",
            "--hide-scrollbars",
            f"--screenshot={screenshot}",
            f"{process.base_url}/docs",
        )

    assert "cdn" not in page.lower()
    expected = documented_operations(document)
    assert len(expected) >= 15, expected
    assert rendered_operations(dom) == expected
    paths = set(document["paths"])
    assert set(PATH.findall(dom)) == paths
    assert document["info"]["title"] in dom
    assert screenshot.stat().st_size > 20_000, "an empty white page is a few KiB"


async def test_the_browser_really_is_offline(tmp_path: Path) -> None:
    """The control: under the same flags, a page that loads Swagger UI from the public CDN
    (as ``/docs`` did) gets no script, so the test above cannot pass by reaching the
    internet."""
    binary = chromium()
    cdn = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"
    html = (
        f'<html><body><script src="{cdn}"></script>'
        "<script>document.body.dataset.loaded = typeof SwaggerUIBundle</script></body></html>"
    )
    page = tmp_path / "cdn.html"
    page.write_text(html)
    dom = await headless(binary, tmp_path / "profile", "--dump-dom", page.as_uri())
    assert 'data-loaded="undefined"' in dom, dom[-500:]
    assert json.dumps(cdn)[1:-1] in dom  # the page itself did load
