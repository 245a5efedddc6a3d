"""Fetcher's typed Manager API client (sync and async, on httpx).

A public leaf: it imports httpx and the standard library only, never server code.

::

    with FetcherClient("http://fetcher:4006", token=TOKEN) as api:
        api.create_connection({...}, product="payments")
        job = api.wait(api.submit(mapped, metadata={"source": "payments"}).job_id)
"""

from fetcher.client._core import ROUTES, Route, Submission
from fetcher.client.client import AsyncFetcherClient, FetcherClient
from fetcher.client.errors import (
    ApiError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    FetcherError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    SchemaValidationError,
    ServerError,
    TransportError,
    WaitTimeoutError,
)

__all__ = [
    "ROUTES",
    "AsyncFetcherClient",
    "FetcherClient",
    "Route",
    "Submission",
    # errors
    "ApiError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "FetcherError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "SchemaValidationError",
    "ServerError",
    "TransportError",
    "WaitTimeoutError",
]
