"""The Worker's health server on ``HEALTH_PORT`` (contract §2.10, §2.11).

``/health``, ``/readyz`` (database, rabbitmq, object_storage), ``/readyz/tenant/{id}``,
``/metrics`` and ``/version``, with the same bodies as the Manager's; every other path is
``404 FET-0005`` in the §2.2 shape.
"""

from __future__ import annotations

import json
import logging

from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fetcher import __version__
from fetcher.bootstrap import Runtime
from fetcher.crypto import Redactor
from fetcher.services.readiness import readiness_report

__all__ = ["create_health_app"]

log = logging.getLogger(__name__)


def _json(body: object, status: int = 200) -> Response:
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return Response(text, status_code=status, media_type="application/json")


def _error(status: int, code: str, title: str, message: str) -> Response:
    return _json({"code": code, "title": title, "message": message}, status)


def create_health_app(runtime: Runtime) -> Starlette:
    redactor = Redactor(secrets=runtime.settings.secrets)

    async def health(_: Request) -> Response:
        if runtime.lifecycle.started.is_set():
            return _json({"status": "healthy"})
        return _json({"status": "unhealthy", "reason": "starting"}, 503)

    async def readyz(_: Request) -> Response:
        status, body = await readiness_report(
            runtime.readiness,
            draining=runtime.lifecycle.draining.is_set(),
            version=__version__,
            deployment_mode=runtime.settings.deployment_mode,
            redact=redactor.redact,
            gauge=runtime.metrics.readyz_up,
        )
        return _json(body, status)

    async def tenant(_: Request) -> Response:
        return _error(
            400,
            "FET-1080",
            "Tenant Context Required",
            "tenant readiness is only available in multi-tenant mode",
        )

    async def metrics(_: Request) -> Response:
        try:
            runtime.metrics.outbox_pending.set(await runtime.store.count_unsent())
        except Exception as exc:  # a scrape must not fail because the store is down
            log.warning("metrics: outbox count unavailable: %s", redactor.redact(str(exc)))
        return Response(
            generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_PLAIN_0_0_4
        )

    async def version(_: Request) -> Response:
        return _json({"version": __version__})

    async def not_found(_: Request, __: Exception) -> Response:
        return _error(404, "FET-0005", "Not Found", "The requested route does not exist.")

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/readyz", readyz),
            Route("/readyz/tenant/{id}", tenant),
            Route("/metrics", metrics),
            Route("/version", version),
        ],
        exception_handlers={404: not_found},
    )
