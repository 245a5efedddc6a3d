"""Route guards of §12.1–§12.3: authentication (401), then the route's scope (403).

``requires(scope)`` is the dependency every business route declares; FastAPI resolves it
before the route body runs, so both checks come before the path ID, ``X-Product-Name``, the
body and the rate limit (§12.1). With ``AUTH_MODE=none`` it yields :data:`ANONYMOUS`.

``app.state.authenticator`` is ``None`` without authentication, else an object with
``async authenticate(request) -> Principal`` that raises the 401/503 ``ApiError`` itself
(``fetcher.adapters.auth.BearerAuthenticator``). Once a caller is known, its ``sub`` and, in
multi-tenant mode, its ``tenant`` are bound to the log context, so every line logged while
the request is served carries them (§12.4); the request's own context ends with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol

from fastapi import Depends, Request
from fastapi.routing import APIRoute

from fetcher.services.errors import ApiError
from fetcher.services.log_context import bind_log_context
from fetcher.services.principal import ANONYMOUS, Principal, Scope

__all__ = [
    "Authenticator",
    "ConnectionsRead",
    "ConnectionsWrite",
    "EventsRead",
    "JobsRead",
    "JobsWrite",
    "ResultsRead",
    "requires",
    "route_scope",
]

#: Each guard ``requires`` built, with its scope: the OpenAPI document reads it (§12.3).
_GUARDS: dict[Callable[..., Any], Scope] = {}


class Authenticator(Protocol):
    async def authenticate(self, request: Request) -> Principal: ...


def requires(scope: Scope) -> Any:
    """The dependency of a route guarded by ``scope`` (§12.3); it returns the Principal."""

    async def guard(request: Request) -> Principal:
        authenticator: Authenticator | None = getattr(request.app.state, "authenticator", None)
        if authenticator is None:
            principal = ANONYMOUS
        else:
            principal = await authenticator.authenticate(request)
            # The middleware's request context is reset when the request ends, and these
            # bindings with it. The tenant "" (single-tenant) is left out (§12.4).
            bind_log_context(sub=principal.sub, tenant=principal.tenant)
        if not principal.has_scope(scope):
            raise ApiError("FET-0011", f"token lacks scope {scope.value}")
        return principal

    _GUARDS[guard] = scope
    return Depends(guard)


def route_scope(route: APIRoute) -> Scope | None:
    """The §12.3 scope guarding ``route`` (``None``: an open operational route)."""
    pending = list(route.dependant.dependencies)
    while pending:
        dependant = pending.pop()
        scope = _GUARDS.get(dependant.call) if dependant.call is not None else None
        if scope is not None:
            return scope
        pending.extend(dependant.dependencies)
    return None


#: A route's Principal, guarded by its §12.3 scope.
ConnectionsRead = Annotated[Principal, requires(Scope.CONNECTIONS_READ)]
ConnectionsWrite = Annotated[Principal, requires(Scope.CONNECTIONS_WRITE)]
JobsWrite = Annotated[Principal, requires(Scope.JOBS_WRITE)]
JobsRead = Annotated[Principal, requires(Scope.JOBS_READ)]
EventsRead = Annotated[Principal, requires(Scope.EVENTS_READ)]
ResultsRead = Annotated[Principal, requires(Scope.RESULTS_READ)]
