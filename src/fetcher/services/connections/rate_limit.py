"""The connection-test rate limiter (contract §2.6.7 step 2), in process memory.

Two token buckets guard ``POST …/{id}/test``: one per connection ID (capacity 10, refilled
continuously at 10 per 60 s) and one per Manager process (capacity 60, refilled at 60 per
60 s). A request is admitted only when both hold a token, and then takes one from each;
otherwise it is refused with ``429 FET-0006`` and ``Retry-After: <N>``, where N is the ceiling
of the longer of the two waits, at least 1.

§12.5: every bucket belongs to one tenant, the global one included: each tenant has its own
"global" bucket, and a connection's bucket is keyed by tenant and ID, so one tenant can never
drain another's budget. Single-tenant mode has the one tenant ``""``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from fetcher.services.errors import ApiError

__all__ = ["ConnectionTestLimiter", "TokenBucket", "rate_limited"]

K = TypeVar("K")

#: Forget full per-connection buckets once this many are held (a full bucket equals none).
_PRUNE_THRESHOLD = 10_000


@dataclass(slots=True)
class TokenBucket:
    """A continuously refilled bucket: ``capacity`` tokens, ``rate`` tokens per second."""

    capacity: float
    rate: float
    tokens: float
    updated: float

    @classmethod
    def full(cls, capacity: float, per_seconds: float, now: float) -> TokenBucket:
        return cls(capacity, capacity / per_seconds, capacity, now)

    def refill(self, now: float) -> None:
        elapsed = max(0.0, now - self.updated)
        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
        self.updated = now

    def wait(self) -> float:
        """Seconds until one token is available (0 when one is)."""
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def is_full(self) -> bool:
        return self.tokens >= self.capacity


def rate_limited(wait_seconds: float) -> ApiError:
    """§2.6.7: ``429 FET-0006`` with the message and ``Retry-After`` for ``wait_seconds``."""
    seconds = max(1, math.ceil(wait_seconds))
    return ApiError(
        "FET-0006",
        f"Connection test limit reached. Try again in {seconds} seconds.",
        headers={"Retry-After": str(seconds)},
    )


@dataclass
class ConnectionTestLimiter:
    """Per-connection and global token buckets (§2.6.7). ``clock`` is monotonic seconds."""

    per_connection: int = 10
    global_capacity: int = 60
    period_seconds: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[tuple[str, str], TokenBucket] = field(
        default_factory=dict, init=False, repr=False
    )
    _global: dict[str, TokenBucket] = field(default_factory=dict, init=False, repr=False)

    def admit(self, connection_id: str, *, tenant: str = "") -> None:
        """Take one token from both of ``tenant``'s buckets, or raise ``429 FET-0006`` taking
        none."""
        now = self.clock()
        overall = self._bucket(self._global, tenant, self.global_capacity, now)
        bucket = self._bucket(self._buckets, (tenant, connection_id), self.per_connection, now)
        bucket.refill(now)
        overall.refill(now)
        wait = max(bucket.wait(), overall.wait())
        if wait > 0:
            raise rate_limited(wait)
        bucket.tokens -= 1
        overall.tokens -= 1

    def _bucket(
        self, buckets: dict[K, TokenBucket], key: K, capacity: int, now: float
    ) -> TokenBucket:
        bucket = buckets.get(key)
        if bucket is None:
            _prune(buckets, now)
            bucket = TokenBucket.full(capacity, self.period_seconds, now)
            buckets[key] = bucket
        return bucket


def _prune(buckets: dict[K, TokenBucket], now: float) -> None:
    """Forget full buckets once there are many (a full bucket equals none), bounding memory
    whatever the number of connections and tenants (§13 "Bounded memory")."""
    if len(buckets) < _PRUNE_THRESHOLD:
        return
    for key, bucket in list(buckets.items()):
        bucket.refill(now)
        if bucket.is_full():
            del buckets[key]
