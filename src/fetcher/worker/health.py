"""The Worker's health server on ``HEALTH_PORT`` (contract §2.10, §2.11).

``/health``, ``/readyz`` (database, rabbitmq, object_storage), ``/readyz/tenant/{id}``,
``/metrics`` and ``/version``: the Manager's routes, answered by the same
:class:`fetcher.services.operations.service.Operations`. Every other path is ``404 FET-0005`` in the
§2.2 shape.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fetcher.bootstrap import Runtime
from fetcher.services.jsontext import compact_json
from fetcher.services.operations.service import JSON, Operations, Reply

__all__ = ["create_health_app"]

_NOT_FOUND = {
    "code": "FET-0005",
    "title": "Not Found",
    "message": "The requested route does not exist.",
}


def _response(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, media_type=reply.media_type)


def create_health_app(runtime: Runtime) -> Starlette:
    operations = Operations(runtime)

    async def health(_: Request) -> Response:
        return _response(operations.health())

    async def readyz(_: Request) -> Response:
        return _response(await operations.readyz())

    async def tenant(request: Request) -> Response:
        return _response(await operations.tenant_readyz(request.path_params["id"]))

    async def metrics(_: Request) -> Response:
        return _response(await operations.metrics())

    async def version(_: Request) -> Response:
        return _response(operations.version())

    async def not_found(_: Request, __: Exception) -> Response:
        body = compact_json(_NOT_FOUND)
        return Response(body, status_code=404, media_type=JSON)

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
