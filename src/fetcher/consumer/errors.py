"""The consumer kit's closed error taxonomy, drawn in one place.

::

    ConsumerError
    ├── EventError                 a received event must not be trusted (reject it)
    │   ├── MissingHeaderError     a required CloudEvents or signing header is absent (§8.4, §8.5)
    │   ├── BadSignatureError      ``x-message-signature`` does not match (§8.5), or bad version
    │   ├── EventTimeError         ``t`` is outside the freshness window
    │   │   ├── StaleEventError    ``t`` is older than ``max_age``
    │   │   └── FutureEventError   ``t`` is further ahead than ``max_future``
    │   ├── UnknownSchemaVersionError   ``ce-schemaversion`` is not ``2.0.0``
    │   ├── TenantMismatchError    ``ce-tenantid`` / ``X-Tenant-ID`` name another tenant (§12.5)
    │   └── MalformedEventError    signed, but the body or headers break §8.2–§8.4
    └── ResultError                a result object cannot be used
        ├── ResultNotFoundError    no object at the key
        ├── IntegrityError         tag, HMAC, size or framing failed: no row was yielded
        └── ResultFormatError      authentic bytes that are not a §5.1 document

No message ever carries a key, a signature value or a row.
"""

from __future__ import annotations

__all__ = [
    "BadSignatureError",
    "ConsumerError",
    "EventError",
    "EventTimeError",
    "FutureEventError",
    "IntegrityError",
    "MalformedEventError",
    "MissingHeaderError",
    "ResultError",
    "ResultFormatError",
    "ResultNotFoundError",
    "StaleEventError",
    "TenantMismatchError",
    "UnknownSchemaVersionError",
]


class ConsumerError(Exception):
    """Base of every error the consumer kit raises."""


class EventError(ConsumerError):
    """The event must be rejected (dead-lettered), never processed."""


class MissingHeaderError(EventError):
    """A required header is absent; ``header`` names it."""

    def __init__(self, header: str) -> None:
        super().__init__(f"missing header {header!r}")
        self.header = header


class BadSignatureError(EventError):
    """The §8.5 signature does not verify (wrong key, tampered body, routing key or exchange)."""


class EventTimeError(EventError):
    """The signing time ``t`` is outside the accepted window; ``skew`` = now − t in seconds."""

    def __init__(self, message: str, skew: int) -> None:
        super().__init__(message)
        self.skew = skew


class StaleEventError(EventTimeError):
    """``t`` is older than the accepted age."""


class FutureEventError(EventTimeError):
    """``t`` lies further in the future than the accepted clock skew."""


class UnknownSchemaVersionError(EventError):
    """``ce-schemaversion`` is not a version this kit understands."""

    def __init__(self, version: str) -> None:
        super().__init__(f"unknown event schema version {version!r}")
        self.version = version


class TenantMismatchError(EventError):
    """The event belongs to another tenant than the keys it was verified with."""

    def __init__(self, expected: str, received: str) -> None:
        super().__init__(f"event for tenant {received!r}, expected {expected!r}")
        self.expected = expected
        self.received = received


class MalformedEventError(EventError):
    """The event is authentic but does not follow §8.2–§8.4."""


class ResultError(ConsumerError):
    """A result object cannot be opened."""


class ResultNotFoundError(ResultError):
    """No object exists at the key."""


class IntegrityError(ResultError):
    """The object failed verification (GCM tag, HMAC, size, truncation). No row was yielded."""


class ResultFormatError(ResultError):
    """Verified bytes that are not a ``{datasource: {table: [row, …]}}`` document."""
