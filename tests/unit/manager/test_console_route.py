"""``/console`` (issue 21): served from the package's own files with a strict CSP, outside
``/openapi.json``; the files load nothing from elsewhere and never build markup from data (the
browser-level proof is tests/e2e/test_console.py)."""

from __future__ import annotations

import re

from fetcher.manager.routes.console import CONTENT_SECURITY_POLICY, console_files
from tests.unit.manager.conftest import Harness, HarnessFactory

#: Any absolute or protocol-relative URL (a CDN, a font host).
EXTERNAL = re.compile(r"(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}")
#: Ways to turn a string into markup or code, or to keep a token beyond the tab's memory.
FORBIDDEN_JS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
    r"localStorage|sessionStorage|document\.cookie|indexedDB"
)
COMMENT_LINE = re.compile(r"^\s*//.*$", re.M)
#: Inline script, inline style and inline handlers (the CSP would block them anyway).
INLINE_HTML = re.compile(r"(?i)<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=")


async def test_the_page_and_its_files_carry_the_policy(h: Harness) -> None:
    page = await h.client.get("/console")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    policy = page.headers["content-security-policy"]
    assert policy == CONTENT_SECURITY_POLICY
    for directive in ("default-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"):
        assert directive in policy
    assert "unsafe" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    for name in console_files():
        served = await h.client.get(f"/console/{name}")
        assert served.status_code == 200, name
        assert served.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    module = await h.client.get("/console/main.js")
    assert module.headers["content-type"] == "text/javascript; charset=utf-8"


async def test_the_address_with_a_trailing_slash_is_the_page(h: Harness) -> None:
    """Issue 33: ``/console/`` is what people type; it serves the page, with its policy."""
    page, slashed = await h.client.get("/console"), await h.client.get("/console/")
    assert slashed.status_code == 200
    assert slashed.content == page.content
    assert slashed.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


async def test_unknown_files_are_unknown_routes(h: Harness) -> None:
    for path in ("/console/nope.js", "/console/..%2fapp.py", "/console//", "/console/a/b.js"):
        response = await h.client.get(path)
        assert response.status_code == 404, path
        assert response.json()["code"] == "FET-0005"
    assert (await h.client.post("/console")).status_code == 405


async def test_config_says_how_to_authenticate(make_harness: HarnessFactory) -> None:
    plain = await make_harness()
    assert (await plain.client.get("/console/config.json")).json() == {
        "authMode": "none",
        "multiTenant": False,
        "tenantClaim": "tenantId",
        "traceUrlTemplate": None,
    }
    template = "https://tempo.example/trace/{traceId}?orgId=1"
    linked = await make_harness(env={"TRACE_URL_TEMPLATE": template})
    body = (await linked.client.get("/console/config.json")).json()
    assert body["traceUrlTemplate"] == template


async def test_the_console_is_not_in_the_api_document(h: Harness) -> None:
    document = (await h.client.get("/openapi.json")).json()
    assert not [path for path in document["paths"] if path.startswith("/console")]


def test_the_files_load_nothing_elsewhere_and_build_no_markup() -> None:
    files = console_files()
    assert {"index.html", "main.js", "dom.js", "api.js", "console.css"} <= set(files)
    for name, (content, _) in files.items():
        # An XML namespace is a name, never fetched.
        text = content.decode().replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert EXTERNAL.search(text) is None, (name, EXTERNAL.search(text))
        if name.endswith(".js"):
            code = COMMENT_LINE.sub("", text)  # the comments name what the code never does
            assert FORBIDDEN_JS.search(code) is None, (name, FORBIDDEN_JS.search(code))
    page = files["index.html"][0].decode()
    assert INLINE_HTML.search(page) is None, INLINE_HTML.search(page)
    assert set(re.findall(r'(?:src|href)="(/[^"]+)"', page)) == {
        "/console/favicon.svg",
        "/console/console.css",
        "/console/main.js",
        "/docs",
    }
