"""The web console at ``/console`` (issue 21): static files shipped inside the package.

The console is a read-mostly single page (plain ES modules, no build step, no framework) that
talks only to this Manager's own API, with the same bearer token and checks as any client. This
module only serves its files; every piece of data it shows comes from the public routes.

* Files: an allow-list read once from ``fetcher/manager/console/`` (package data), so no path
  from a request ever reaches the filesystem. ``GET /console`` (and ``GET /console/``, the
  address people type) is the page; ``GET /console/<name>`` one of its files; any other name
  is the §2.1 unknown route (404 FET-0005).
* ``GET /console/config.json``: what the page needs to know before its first API call: the
  authentication mode (``jwt``: ask for a token), multi-tenant mode and the tenant claim's name
  (to label the tenant picker), and ``TRACE_URL_TEMPLATE`` (§15.3, ``null`` when unset) to
  link a job's trace. No secret, nothing a request can influence.
* Every answer carries a strict Content-Security-Policy: scripts, styles, images and requests
  only from this origin, no inline script or style, no ``eval``, never framed; plus
  ``nosniff`` and ``no-referrer``. So even a rendering bug could not load or send anything
  elsewhere, and a value that slipped into the DOM as HTML could not run a handler.
* The routes are left out of ``/openapi.json`` (``include_in_schema=False``): the console is
  not part of the API contract, and the document stays as it was.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files

from fastapi import APIRouter
from starlette.responses import Response

from fetcher.manager.deps import RuntimeDep
from fetcher.services.errors import ApiError

__all__ = ["CONSOLE_PATH", "CONTENT_SECURITY_POLICY", "console_files", "router"]

CONSOLE_PATH = "/console"

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "font-src 'none'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)

_SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    # The files change with the installed package; a browser revalidates instead of guessing.
    "Cache-Control": "no-cache",
}

_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

router = APIRouter(include_in_schema=False)


@cache
def console_files() -> dict[str, tuple[bytes, str]]:
    """Every console file by name → (content, media type), read once from the package."""
    folder = files("fetcher.manager").joinpath("console")
    served: dict[str, tuple[bytes, str]] = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _MEDIA_TYPES:
            served[entry.name] = (entry.read_bytes(), _MEDIA_TYPES[suffix])
    return served


def _file(name: str) -> Response:
    found = console_files().get(name)
    if found is None:
        raise ApiError("FET-0005", "The requested route does not exist.")
    content, media_type = found
    return Response(content, media_type=media_type, headers=_SECURITY_HEADERS)


@router.get(CONSOLE_PATH)
@router.get(CONSOLE_PATH + "/")
async def console_page() -> Response:
    """The page itself (``index.html``), at ``/console`` and ``/console/`` alike: the page's
    own files are named by absolute paths, so it works from either address."""
    return _file("index.html")


@router.get(f"{CONSOLE_PATH}/config.json")
async def console_config(runtime: RuntimeDep) -> Response:
    """How the page should authenticate: ``authMode`` ``none``/``jwt``, ``multiTenant`` and
    the claim that names a token's tenant (§12.5); ``traceUrlTemplate`` (§15.3)."""
    settings = runtime.settings
    body = {
        "authMode": "jwt" if settings.auth.enabled else "none",
        "multiTenant": settings.multi_tenant,
        "tenantClaim": settings.auth.tenant_claim,
        "traceUrlTemplate": settings.trace_url_template,
    }
    return Response(json.dumps(body), media_type="application/json", headers=_SECURITY_HEADERS)


@router.get(CONSOLE_PATH + "/{name}")
async def console_file(name: str) -> Response:
    """One of the page's own files (modules, style sheet, icon)."""
    return _file(name)
