"""Route guards of §12.1–§12.3: authentication (401), then the route's scope (403).

``requires(scope)`` is the dependency every business route declares; FastAPI resolves it
before the route body runs, so both checks come before the path ID, ``X-Product-Name``, the
body and the rate limit (§12.1). With ``AUTH_MODE=none`` it yields :data:`ANONYMOUS`.

``app.state.authenticator`` is ``None`` without authentication, else an object with
``async authenticate(request) -> Principal`` that raises the 401/503 ``ApiError`` itself.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import Depends, Request

from fetcher.services.errors import ApiError
from fetcher.services.principal import ANONYMOUS, Principal, Scope

__all__ = [
    "Authenticator",
    "ConnectionsRead",
    "ConnectionsWrite",
    "EventsRead",
    "JobsRead",
    "JobsWrite",
    "current_principal",
    "requires",
]


class Authenticator(Protocol):
    async def authenticate(self, request: Request) -> Principal: ...


def requires(scope: Scope) -> Any:
    """The dependency of a route guarded by ``scope`` (§12.3); it returns the Principal."""

    async def guard(request: Request) -> Principal:
        authenticator: Authenticator | None = getattr(request.app.state, "authenticator", None)
        principal = (
            ANONYMOUS if authenticator is None else await authenticator.authenticate(request)
        )
        if not principal.has_scope(scope):
            raise ApiError("FET-0011", f"token lacks scope {scope.value}")
        request.state.principal = principal
        return principal

    return Depends(guard)


def current_principal(request: Request) -> Principal:
    """The Principal a guard stored on this request (``ANONYMOUS`` on unguarded routes)."""
    principal = getattr(request.state, "principal", None)
    return principal if isinstance(principal, Principal) else ANONYMOUS


#: A route's Principal, guarded by its §12.3 scope.
ConnectionsRead = Annotated[Principal, requires(Scope.CONNECTIONS_READ)]
ConnectionsWrite = Annotated[Principal, requires(Scope.CONNECTIONS_WRITE)]
JobsWrite = Annotated[Principal, requires(Scope.JOBS_WRITE)]
JobsRead = Annotated[Principal, requires(Scope.JOBS_READ)]
EventsRead = Annotated[Principal, requires(Scope.EVENTS_READ)]
