"""W3C Trace Context values as stored with an outbox row (issue 22, docs/tracing.md).

A job event carries its job's trace context as the CloudEvents distributed-tracing extension
(``ce-traceparent``, ``ce-tracestate``). The value is captured once, when the Worker writes
the terminal transition, and stored with the outbox row so every (re-)emission carries the
same one. Only a well-formed value is ever stored or sent: these checks follow the W3C Trace
Context grammar (version ``00``, non-zero IDs; at most 32 ``tracestate`` members, 512 chars).
Pure: no OpenTelemetry import, so records and stores can use it.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["valid_trace_id", "valid_traceparent", "valid_tracestate"]

_TRACEPARENT: Final = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
_KEY: Final = r"(?:[a-z][_0-9a-z*/-]{0,255}|[a-z0-9][_0-9a-z*/-]{0,240}@[a-z][_0-9a-z*/-]{0,13})"
_VALUE: Final = r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
_MEMBER: Final = re.compile(f"{_KEY}={_VALUE}")
_TRACESTATE_MAX_CHARS: Final = 512
_TRACESTATE_MAX_MEMBERS: Final = 32


_TRACE_ID: Final = re.compile(r"[0-9a-f]{32}")


def valid_trace_id(value: object) -> bool:
    """``value`` is a W3C trace ID: 32 lowercase hex digits, not all zero (§15.3)."""
    return isinstance(value, str) and bool(_TRACE_ID.fullmatch(value)) and set(value) != {"0"}


def valid_traceparent(value: object) -> bool:
    """``value`` is a version-00 ``traceparent`` with a non-zero trace ID and span ID."""
    if not isinstance(value, str):
        return False
    match = _TRACEPARENT.fullmatch(value)
    return match is not None and set(match[1]) != {"0"} and set(match[2]) != {"0"}


def valid_tracestate(value: object) -> bool:
    """``value`` is a non-empty ``tracestate`` list of well-formed ``key=value`` members."""
    if not isinstance(value, str) or not value or len(value) > _TRACESTATE_MAX_CHARS:
        return False
    members = [m.strip(" \t") for m in value.split(",")]
    if len(members) > _TRACESTATE_MAX_MEMBERS:
        return False
    return all(_MEMBER.fullmatch(m) for m in members)
