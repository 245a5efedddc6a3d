"""Fetcher's typed Manager API client (sync and async, on httpx).

A public leaf: it imports httpx and the standard library only, never server code.

::

    with FetcherClient("http://fetcher:4006", token=os.environ["FETCHER_TOKEN"]) as api:
        api.create_connection({...}, product="payments")
        job = api.wait(api.submit(mapped, metadata={"source": "payments"}).job_id)

``token`` may also be a function returning the current token (called before every business
request, so short-lived tokens can be refreshed); a 401 raises ``AuthenticationError``, a
403 ``PermissionDeniedError``.
"""

from fetcher.client import errors
from fetcher.client._core import ROUTES, Route
from fetcher.client.client import (
    AsyncFetcherClient,
    AsyncTokenSource,
    FetcherClient,
    TokenSource,
)
from fetcher.client.errors import *  # noqa: F403 - the error taxonomy, errors.__all__
from fetcher.client.jobs import JobListPage
from fetcher.client.objects import Job, Submission

__all__ = [
    "ROUTES",
    "AsyncFetcherClient",
    "AsyncTokenSource",
    "FetcherClient",
    "Job",
    "JobListPage",
    "Route",
    "Submission",
    "TokenSource",
]
__all__ += errors.__all__  # the typed errors (§2.2, §2.3)
