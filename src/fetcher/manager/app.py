"""The Manager's HTTP application (contract §2): ``create_app(runtime) -> FastAPI``.

* Routing: ``redirect_slashes`` is off, so a trailing slash is an unknown route (§2.1).
* Errors: every non-2xx body is §2.2. ``ApiError`` maps through ``manager/errors.py``;
  ``StoreUnavailableError`` → ``503 FET-0003``; an unknown route → ``404 FET-0005``; a known
  path with another method → ``405 FET-0008`` with ``Allow``; the default validation and
  HTTP-exception handlers are replaced; anything else → ``500 FET-0002`` (middleware).
* :class:`~fetcher.manager.middleware.FetcherMiddleware` adds request IDs, the streaming
  1 MiB body limit, CORS, the ``HTTP_MAX_CONNECTIONS`` limit on requests in flight (§13) and
  HTTP metrics with bounded label sets (§2.11).
* OpenAPI 3.1 at ``/openapi.json``: responses from the models of
  ``services/api/response_models.py``;
  request bodies, path IDs, query parameters and headers from the precise JSON Schemas of
  ``manager/openapi.py``, fitted to this deployment (the SQLITE type where it is accepted, the
  configured ``MAX_PAGINATION_LIMIT`` and limit maxima).
* Authentication (§12.1): with ``AUTH_MODE=jwt``, ``app.state.authenticator`` (the one the
  composition root built, ``runtime.authenticator``) verifies bearer tokens for the guards of
  ``manager/auth.py``, and the document declares the bearer scheme,
  each guarded operation's ``security`` and its 401/403 answers. With ``AUTH_MODE=none`` the
  document declares no security: it describes the deployment it is served by.
* Swagger UI at ``/docs``, served with its scripts and styles from the installed
  ``fastapi-offline`` package under ``/docs/assets/``: the page works in a private network
  with no internet access, and no page refers to a CDN. Like the console, it refuses to be
  framed (``frame-ancestors 'none'``, ``X-Frame-Options: DENY``).
"""

from __future__ import annotations

import logging
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from fastapi.telemetry import TelemetryConfig
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles

from fetcher import __version__
from fetcher.bootstrap import Runtime
from fetcher.manager.auth import route_scope
from fetcher.manager.errors import internal_error
from fetcher.manager.job_list_doc import add_job_list_parameters
from fetcher.manager.json_body import UNPARSABLE
from fetcher.manager.middleware import FetcherMiddleware
from fetcher.manager.openapi import (
    declare_cross_site,
    declare_host_check,
    declare_security,
    list_parameters,
    request_components,
)
from fetcher.manager.responses import error_response
from fetcher.manager.routes import connections, console, events, jobs, operational
from fetcher.manager.telemetry import TelemetryMiddleware
from fetcher.services.api.request_origin import HostPolicy
from fetcher.services.errors import ApiError, invalid_payload
from fetcher.services.store_roles import StoreUnavailableError
from fetcher.settings import Mode

__all__ = ["create_app"]

log = logging.getLogger(__name__)

_DESCRIPTION = (
    "Fetcher Manager API: connections, schema discovery and validation, extraction jobs, the "
    "event feed and operational routes. Every error body is "
    '`{"code","title","message","fields"?,"errors"?}`.'
)


#: Swagger UI 5 (it renders OpenAPI 3.1), as the ``fastapi-offline`` package installs it.
_DOCS_ASSETS = Path(str(files("fastapi_offline").joinpath("static")))
_DOCS_ASSETS_URL = "/docs/assets"

#: The list routes whose ``limit`` follows ``MAX_PAGINATION_LIMIT`` (§2.6.2, §2.6.3).
_LIST_PATHS = ("/v1/management/connections", "/v1/management/connections/unassigned")


class FetcherAPI(FastAPI):
    """FastAPI with an OpenAPI document that also carries the request-body schemas."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema:
            return self.openapi_schema
        schema = get_openapi(
            title=self.title,
            version=self.version,
            openapi_version="3.1.0",
            description=self.description,
            routes=self.routes,
        )
        runtime: Runtime = self.state.runtime
        settings = runtime.settings
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(
            request_components(
                sqlite=settings.mode is Mode.EMBEDDED and bool(settings.sqlite_allowed_dir),
                max_limits=runtime.jobs.max_limits,
            )
        )
        fitted = {p["name"]: p for p in list_parameters(settings.max_pagination_limit)}
        for path in _LIST_PATHS:
            operation = schema["paths"][path]["get"]
            operation["parameters"] = [
                fitted.get(p["name"], p) if p["in"] == "query" else p
                for p in operation["parameters"]
            ]
        add_job_list_parameters(schema, settings.max_pagination_limit)
        declare_host_check(schema)
        if settings.auth.enabled:
            declare_security(schema, self._guarded_operations())
        else:
            declare_cross_site(schema)
        self.openapi_schema = schema
        return schema

    def _guarded_operations(self) -> dict[tuple[str, str], str]:
        """``(method, path)`` → §12.3 scope of every guarded route in the document (read from
        the routers: included routers may be mounted lazily, see :func:`allowed_methods`)."""
        return {
            (method.lower(), route.path): scope.value
            for route in (r for router in _ROUTERS for r in router.routes)
            if isinstance(route, APIRoute) and route.include_in_schema
            for scope in (route_scope(route),)
            if scope is not None
            for method in route.methods or ()
        }


_ROUTERS = (connections.router, jobs.router, events.router, operational.router)


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """Methods of the routes whose path matches; static paths win over ``{id}`` (§2.6).

    The routers' own routes are read as well as the application's, because included routers
    may be mounted lazily (their routes carry the full path, prefix included).
    """
    static: set[str] = set()
    dynamic: set[str] = set()
    routes = [*app.router.routes, *(r for router in _ROUTERS for r in router.routes)]
    for route in routes:
        regex = getattr(route, "path_regex", None)
        methods = getattr(route, "methods", None)
        if regex is None or not methods or regex.match(path) is None:
            continue
        (dynamic if getattr(route, "param_convertors", None) else static).update(methods)
    return sorted(static or dynamic)


def _install_handlers(app: FastAPI) -> None:
    # Starlette calls each handler only for the class it is registered for (below); the
    # isinstance checks narrow the type without an assert, and anything else would be a 500.
    async def on_api_error(_: Request, exc: Exception) -> Response:
        return error_response(exc if isinstance(exc, ApiError) else internal_error())

    async def on_store_unavailable(_: Request, exc: Exception) -> Response:
        log.warning("metadata store unavailable: %s", type(exc).__name__)
        return error_response(
            ApiError("FET-0003", "The service is temporarily unavailable. Please try again later.")
        )

    async def on_http_error(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, StarletteHTTPException):
            return error_response(internal_error())
        if exc.status_code == 404:
            return error_response(ApiError("FET-0005", "The requested route does not exist."))
        if exc.status_code == 405:
            allow = ", ".join(allowed_methods(app, request.url.path))
            err = ApiError("FET-0008", "The method is not allowed for the requested route.")
            return error_response(err, {"Allow": allow})
        return error_response(internal_error())

    async def on_validation_error(_: Request, exc: Exception) -> Response:
        return error_response(invalid_payload(UNPARSABLE))

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(StoreUnavailableError, on_store_unavailable)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)


#: The console's framing headers: no other site may frame ``/docs`` (clickjacking its buttons).
_DOCS_FRAMING = {"Content-Security-Policy": "frame-ancestors 'none'", "X-Frame-Options": "DENY"}


def _install_docs(app: FastAPI) -> None:
    """``GET /docs`` (§2.10): Swagger UI over ``/openapi.json``, every asset local."""
    app.mount(_DOCS_ASSETS_URL, StaticFiles(directory=_DOCS_ASSETS), name="docs-assets")

    async def docs() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="Fetcher API",
            swagger_js_url=f"{_DOCS_ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{_DOCS_ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{_DOCS_ASSETS_URL}/favicon.png",
            # No call to the public validator service (validator.swagger.io).
            swagger_ui_parameters={"validatorUrl": None},
        )
        page.headers.update(_DOCS_FRAMING)
        return page

    app.add_api_route("/docs", docs, methods=["GET"], include_in_schema=False)


#: FastAPI's own OpenTelemetry spans, metrics and logs stay off: they would record exception
#: messages (which may hold what no span may, §8.7) and read ``OTEL_*`` past our validation.
#: The server span is ``manager/telemetry.py``'s (issue 22).
_NO_FRAMEWORK_TELEMETRY: TelemetryConfig = {
    "tracing": False,
    "metrics": False,
    "logs": False,
    "operation_spans": False,
    "auto_configure": False,
}


def create_app(runtime: Runtime) -> FastAPI:
    """The Manager application over ``runtime`` (routes read it from ``app.state``), guarded
    by ``runtime.authenticator`` (§12.1; ``None``: every caller is anonymous)."""
    app = FetcherAPI(
        title="Fetcher",
        version=__version__,
        description=_DESCRIPTION,
        redirect_slashes=False,
        openapi_url="/openapi.json",
        docs_url=None,  # served by _install_docs, from local assets
        redoc_url=None,
        telemetry=_NO_FRAMEWORK_TELEMETRY,
    )
    app.state.runtime = runtime
    app.state.authenticator = runtime.authenticator
    for router in _ROUTERS:
        app.include_router(router)
    app.include_router(console.router)  # /console: not in /openapi.json
    _install_docs(app)
    _install_handlers(app)
    # Inner to FetcherMiddleware (added first): the request ID is bound when it runs.
    app.add_middleware(TelemetryMiddleware, access_log_enabled=runtime.settings.access_log)
    app.add_middleware(
        FetcherMiddleware,
        metrics=runtime.metrics,
        cors_origins=runtime.settings.cors_origins,
        max_in_flight=runtime.settings.http_max_connections,
        hosts=HostPolicy.build(runtime.settings.allowed_hosts, runtime.settings.server_host),
        refuse_cross_site=not runtime.settings.auth.enabled,
    )
    return app
