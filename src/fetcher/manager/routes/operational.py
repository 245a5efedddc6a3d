"""Operational routes (contract §2.10, §2.11): health, readiness, metrics and version.

The behaviour is :class:`fetcher.services.operations.service.Operations`, shared with the Worker's
health server; this module only routes and documents the routes in the OpenAPI document.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from fetcher.manager.deps import RuntimeDep
from fetcher.manager.openapi import error_responses, parameter
from fetcher.services.api.response_models import ErrorBody, HealthBody, ReadyzBody, VersionBody
from fetcher.services.operations.service import Operations, Reply

__all__ = ["router"]

router = APIRouter(tags=["operations"])


def _response(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, media_type=reply.media_type)


@router.get(
    "/health",
    summary="Liveness",
    responses={
        200: {"model": HealthBody, "description": "Startup has finished"},
        503: {"model": HealthBody, "description": "Still starting"},
    },
)
async def health(runtime: RuntimeDep) -> Response:
    """§2.10: never checks dependencies."""
    return _response(Operations(runtime).health())


@router.get(
    "/readyz",
    summary="Readiness",
    responses={
        200: {"model": ReadyzBody, "description": "Every check is up or skipped"},
        503: {"model": ReadyzBody, "description": "A check is down, or the process is draining"},
    },
)
async def readyz(runtime: RuntimeDep) -> Response:
    """§2.10: parallel checks with a 2 s budget each; 503 during drain (§9.3)."""
    return _response(await Operations(runtime).readyz())


@router.get(
    "/readyz/tenant/{id}",
    summary="Tenant readiness (multi-tenant mode only)",
    responses={
        # The body is ReadyzBody plus "tenant" (the SDK's readyz_tenant reads it so).
        200: {"description": 'Multi-tenant mode: the /readyz answer plus "tenant"'},
        400: {"model": ErrorBody, "description": "FET-1080 in single-tenant mode"},
        404: {"model": ErrorBody, "description": "FET-1081: the ID breaks the tenant pattern"},
        503: {"description": 'Multi-tenant mode: a check is down, or draining (plus "tenant")'},
    },
    openapi_extra={"parameters": [parameter("id", "path", "Tenant ID", required=True)]},
)
async def readyz_tenant(request: Request, runtime: RuntimeDep) -> Response:
    """§2.10: single-tenant ``400 FET-1080``; multi-tenant, the ``/readyz`` answer plus
    ``"tenant"`` for an ID matching the tenant pattern, else ``404 FET-1081``."""
    tenant_id = request.path_params["id"]
    return _response(await Operations(runtime).tenant_readyz(tenant_id))


@router.get(
    "/metrics",
    summary="Prometheus metrics (text format 0.0.4)",
    responses={200: {"description": "Metrics", "content": {"text/plain": {}}}},
)
async def metrics(runtime: RuntimeDep) -> Response:
    """§2.11; ``fetcher_outbox_pending`` is read from the store at scrape time, and a store
    failure of any kind never fails the scrape."""
    return _response(await Operations(runtime).metrics())


@router.get(
    "/version",
    summary="Package version",
    responses={200: {"model": VersionBody, "description": "The version"}, **error_responses()},
)
async def version() -> Response:
    """§2.10."""
    return _response(Operations.version())
