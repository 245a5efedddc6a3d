"""JSON responses of the Manager: every non-2xx body is the §2.2 error body."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from starlette.responses import JSONResponse, Response

from fetcher.manager.errors import error_body, status_for
from fetcher.services.errors import ApiError

__all__ = ["error_response", "json_response", "json_response_off_loop"]


def json_response(
    body: object, status_code: int = 200, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """``Content-Type: application/json`` (§2.1), compact UTF-8."""
    return JSONResponse(body, status_code=status_code, headers=dict(headers or {}))


async def json_response_off_loop(body: object) -> Response:
    """:func:`json_response`'s bytes, encoded in a worker thread (§13 "Blocking work"): a
    list page of 100 items never holds the event loop while it is encoded."""
    encode = JSONResponse(None).render
    return Response(await asyncio.to_thread(encode, body), media_type="application/json")


def error_response(err: ApiError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The §2.2 body with the §2.3 status and any header the code requires (``Retry-After``)."""
    merged = {**err.headers, **(headers or {})}
    return json_response(error_body(err), status_for(err), merged)
