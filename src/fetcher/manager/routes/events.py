"""The event feed route (contract §2.12)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from fetcher.manager.auth import EventsRead
from fetcher.manager.deps import RuntimeDep, parse_feed_query
from fetcher.manager.openapi import error_responses, feed_parameters
from fetcher.services.api.response_models import FeedPage
from fetcher.services.events.feed import render_page_async

__all__ = ["router"]

router = APIRouter(prefix="/v1/events", tags=["events"])


@router.get(
    "",
    summary="Read terminal job events in order",
    responses={200: {"model": FeedPage, "description": "A page of events"}, **error_responses(400)},
    openapi_extra={"parameters": feed_parameters()},
)
async def read_events(request: Request, runtime: RuntimeDep, principal: EventsRead) -> Response:
    """§2.12: ``data`` is the stored event body, verbatim; a page is capped at ~4 MiB of
    ``data`` and encoded off the event loop (§13 "Blocking work"). Only the tenant's events
    (§12.5) and, for a product-restricted token, its products' (§12.4)."""
    query = parse_feed_query(request.query_params)
    page = await runtime.feed.read(
        after=query.after,
        limit=query.limit,
        event_type=query.event_type,
        wait=query.wait,
        tenant=principal.tenant,
        products=principal.products,
    )
    return Response(await render_page_async(page), media_type="application/json")
