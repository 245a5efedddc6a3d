"""The context every log line carries (§9.1: logs are JSON lines on stdout).

A request, a job or a delivery binds its identifiers once, where they become known, and every
line logged below it (in the same task, or in tasks and threads it starts, which copy the
context) carries them as fields. ``grep <jobId>`` over the Manager's and the Worker's output
then follows one job from creation to its event.

The keys are fixed: ``request_id`` (the Manager's ``X-Request-ID``), ``job_id``,
``connection_id``, ``product``, and ``tenant`` and ``sub``, reserved for multi-tenant mode and
authentication (§12). The log formatter (``fetcher.cli.logs``) redacts every value (§8.7).

Built on :mod:`contextvars` rather than a logging framework: every module already logs through
:mod:`logging`, and so do uvicorn and the drivers, whose lines then carry the context too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from types import MappingProxyType

__all__ = [
    "CONTEXT_KEYS",
    "bind_log_context",
    "current_log_context",
    "id_list",
    "log_context",
    "reset_log_context",
]

CONTEXT_KEYS = ("request_id", "job_id", "connection_id", "product", "tenant", "sub")

_EMPTY: Mapping[str, str] = MappingProxyType({})
_CONTEXT: ContextVar[Mapping[str, str]] = ContextVar("fetcher_log_context", default=_EMPTY)

LogContextToken = Token[Mapping[str, str]]


def bind_log_context(**values: str | None) -> LogContextToken:
    """Add ``values`` to the current context (``None`` and empty values are left out) until
    :func:`reset_log_context` with the returned token, or the end of the current task."""
    unknown = sorted(set(values) - set(CONTEXT_KEYS))
    if unknown:
        raise ValueError(f"unknown log context keys: {', '.join(unknown)}")
    merged = {**_CONTEXT.get(), **{k: v for k, v in values.items() if v}}
    return _CONTEXT.set(MappingProxyType(merged))


def reset_log_context(token: LogContextToken) -> None:
    """Restore the context as it was before the :func:`bind_log_context` that gave ``token``."""
    _CONTEXT.reset(token)


@contextmanager
def log_context(**values: str | None) -> Iterator[None]:
    """``values`` bound for the duration of the block."""
    token = bind_log_context(**values)
    try:
        yield
    finally:
        reset_log_context(token)


def current_log_context() -> Mapping[str, str]:
    """The fields bound in the current context (read-only)."""
    return _CONTEXT.get()


def id_list(ids: Iterable[str]) -> str | None:
    """Several IDs as one field value (a job may read several connections), or ``None``."""
    return ",".join(sorted(set(ids))) or None
