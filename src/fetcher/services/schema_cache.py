"""The in-process schema cache of validate-schema (contract §2.7).

Entries are keyed by ``configName`` and discovery scope and live ``SCHEMA_CACHE_TTL_SECONDS``
(0 disables the cache). Each entry records the connection's ``updatedAt`` (for an internal
datasource, the process start time): a lookup with a different ``updatedAt`` ignores the entry,
so a PATCH or DELETE served by another Manager replica also takes effect. PATCH and DELETE drop
the entries of the connection's name here. Only validate-schema uses the cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from fetcher.engine.types import DiscoveredSchema

__all__ = ["SchemaCache"]

_Key = tuple[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class _Entry:
    schema: DiscoveredSchema
    updated_at: datetime
    expires: float


@dataclass
class SchemaCache:
    """``ttl_seconds`` of 0 disables caching; ``clock`` is monotonic seconds."""

    ttl_seconds: int = 300
    clock: Callable[[], float] = time.monotonic
    _entries: dict[_Key, _Entry] = field(default_factory=dict, init=False, repr=False)

    @staticmethod
    def _key(config_name: str, scope: Sequence[str]) -> _Key:
        return config_name, tuple(sorted(scope))

    def get(
        self, config_name: str, scope: Sequence[str], updated_at: datetime
    ) -> DiscoveredSchema | None:
        """The cached schema, unless absent, expired or recorded for another ``updatedAt``."""
        key = self._key(config_name, scope)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= self.clock() or entry.updated_at != updated_at:
            del self._entries[key]
            return None
        return entry.schema

    def put(
        self,
        config_name: str,
        scope: Sequence[str],
        updated_at: datetime,
        schema: DiscoveredSchema,
    ) -> None:
        if self.ttl_seconds <= 0:
            return
        expires = self.clock() + self.ttl_seconds
        self._entries[self._key(config_name, scope)] = _Entry(schema, updated_at, expires)

    def invalidate(self, *config_names: str) -> None:
        """Drop every entry of these names (§2.6.5 old and new name, §2.6.6)."""
        names = set(config_names)
        for key in [k for k in self._entries if k[0] in names]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
