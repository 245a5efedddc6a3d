"""Operational routes (contract §2.10, §2.11): health, readiness, metrics and version."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from starlette.responses import Response

from fetcher import __version__
from fetcher.crypto import Redactor
from fetcher.manager.deps import RuntimeDep
from fetcher.manager.responses import json_response
from fetcher.manager.schemas import (
    ErrorBody,
    HealthBody,
    ReadyzBody,
    VersionBody,
    error_responses,
    parameter,
)
from fetcher.services.errors import ApiError
from fetcher.services.ports import StoreUnavailableError
from fetcher.services.readiness import readiness_report

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["operations"])


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
    if runtime.lifecycle.started.is_set():
        return json_response({"status": "healthy"})
    return json_response({"status": "unhealthy", "reason": "starting"}, 503)


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
    settings = runtime.settings
    status, body = await readiness_report(
        runtime.readiness,
        draining=runtime.lifecycle.draining.is_set(),
        version=__version__,
        deployment_mode=settings.deployment_mode,
        redact=Redactor(secrets=settings.secrets).redact,
        gauge=runtime.metrics.readyz_up,
    )
    return json_response(body, status)


@router.get(
    "/readyz/tenant/{id}",
    summary="Tenant readiness (multi-tenant mode only)",
    responses={400: {"model": ErrorBody, "description": "FET-1080 in single-tenant mode"}},
    openapi_extra={"parameters": [parameter("id", "path", "Tenant ID", required=True)]},
)
async def readyz_tenant() -> Response:
    """§2.10: always ``400 FET-1080``."""
    raise ApiError("FET-1080", "tenant readiness is only available in multi-tenant mode")


@router.get(
    "/metrics",
    summary="Prometheus metrics (text format 0.0.4)",
    responses={200: {"description": "Metrics", "content": {"text/plain": {}}}},
)
async def metrics(runtime: RuntimeDep) -> Response:
    """§2.11; ``fetcher_outbox_pending`` is read from the store at scrape time."""
    try:
        runtime.metrics.outbox_pending.set(await runtime.store.count_unsent())
    except StoreUnavailableError:
        log.warning("metrics: outbox count unavailable")
    return Response(generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_PLAIN_0_0_4)


@router.get(
    "/version",
    summary="Package version",
    responses={200: {"model": VersionBody, "description": "The version"}, **error_responses()},
)
async def version() -> Response:
    """§2.10."""
    return json_response({"version": __version__})
