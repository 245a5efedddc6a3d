"""The in-process schema cache of validate-schema (contract §2.7).

Entries are keyed by ``configName`` and discovery scope and live ``SCHEMA_CACHE_TTL_SECONDS``
(0 disables the cache). Each entry records the connection's ``updatedAt`` (for an internal
datasource, the process start time): a lookup with a different ``updatedAt`` ignores the entry,
so a PATCH or DELETE served by another Manager replica also takes effect. PATCH and DELETE drop
the entries of the connection's name here. Only validate-schema uses the cache.

§12.5: every entry belongs to one tenant (the key starts with it), so two tenants' connections
of the same ``configName`` never share an entry and a tenant's PATCH drops only its own.

The key holds caller-chosen text (the discovery scope), so the cache is bounded (§13 "Bounded
memory"): an LRU of at most :data:`MAX_ENTRIES` entries. Every ``put`` first drops the expired
entries, then, when still full, the least recently used one.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from fetcher.engine.kit import DiscoveredSchema

__all__ = ["MAX_ENTRIES", "SchemaCache"]

#: §13: the schema cache holds at most this many entries.
MAX_ENTRIES = 1000

_Key = tuple[str, str, tuple[str, ...]]


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
    max_entries: int = MAX_ENTRIES
    #: Least recently used first.
    _entries: OrderedDict[_Key, _Entry] = field(default_factory=OrderedDict, init=False, repr=False)

    @staticmethod
    def _key(tenant: str, config_name: str, scope: Sequence[str]) -> _Key:
        return tenant, config_name, tuple(sorted(scope))

    def get(
        self, config_name: str, scope: Sequence[str], updated_at: datetime, *, tenant: str = ""
    ) -> DiscoveredSchema | None:
        """The tenant's cached schema, unless absent, expired or recorded for another
        ``updatedAt``."""
        key = self._key(tenant, config_name, scope)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= self.clock() or entry.updated_at != updated_at:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry.schema

    def put(
        self,
        config_name: str,
        scope: Sequence[str],
        updated_at: datetime,
        schema: DiscoveredSchema,
        *,
        tenant: str = "",
    ) -> None:
        if self.ttl_seconds <= 0 or self.max_entries <= 0:
            return
        now = self.clock()
        self._drop_expired(now)
        key = self._key(tenant, config_name, scope)
        self._entries.pop(key, None)
        while len(self._entries) >= self.max_entries:
            self._entries.popitem(last=False)
        self._entries[key] = _Entry(schema, updated_at, now + self.ttl_seconds)

    def _drop_expired(self, now: float) -> None:
        """Bounded work: at most :attr:`max_entries` entries are looked at."""
        for key in [k for k, entry in self._entries.items() if entry.expires <= now]:
            del self._entries[key]

    def invalidate(self, *config_names: str, tenant: str = "") -> None:
        """Drop every entry of these names of the tenant (§2.6.5 old and new name, §2.6.6)."""
        names = set(config_names)
        for key in [k for k in self._entries if k[0] == tenant and k[1] in names]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
