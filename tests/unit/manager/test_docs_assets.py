"""§2.10 ``GET /docs`` works without internet: the page names no other host, and every script,
style sheet and icon it loads is served by the Manager itself (the browser-level proof, with
the network cut off, is tests/e2e/test_docs_offline.py)."""

from __future__ import annotations

import re

from tests.unit.manager.conftest import Harness

#: Any absolute or protocol-relative URL (a CDN, a validator service, a font host).
EXTERNAL = re.compile(r"(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}")
ASSET = re.compile(r"""(?:src|href)=["']([^"']+)["']""")


async def test_docs_page_loads_only_local_assets(h: Harness) -> None:
    response = await h.client.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert EXTERNAL.search(page) is None, EXTERNAL.search(page)
    assets = ASSET.findall(page)
    assert sorted(assets) == [
        "/docs/assets/favicon.png",
        "/docs/assets/swagger-ui-bundle.js",
        "/docs/assets/swagger-ui.css",
    ]
    assert "url: '/openapi.json'" in page
    assert '"validatorUrl": null' in page
    types = {}
    for asset in assets:
        served = await h.client.get(asset)
        assert served.status_code == 200, asset
        types[asset.rsplit(".", 1)[1]] = served.headers["content-type"].split(";")[0]
    assert types == {"png": "image/png", "js": "text/javascript", "css": "text/css"}


async def test_the_bundled_swagger_ui_renders_openapi_3_1(h: Harness) -> None:
    """Swagger UI renders OpenAPI 3.1 from major version 5 on; ``/openapi.json`` is 3.1."""
    bundle = (await h.client.get("/docs/assets/swagger-ui-bundle.js")).text
    [version] = re.findall(r'PACKAGE_VERSION:"(\d+)\.\d+\.\d+"', bundle)
    assert int(version) >= 5
    assert (await h.client.get("/openapi.json")).json()["openapi"] == "3.1.0"


async def test_unknown_assets_are_fet_0005(h: Harness) -> None:
    response = await h.client.get("/docs/assets/../../etc/passwd")
    assert response.status_code == 404
    response = await h.client.get("/docs/assets/nothing.js")
    assert response.status_code == 404
    assert response.json()["code"] == "FET-0005"
