"""§13 "Bounded memory": the §2.7 schema cache is an LRU of at most 1,000 entries that drops
expired ones, whatever keys (discovery scopes) callers choose."""

from __future__ import annotations

from datetime import UTC, datetime

from fetcher.engine.types import DiscoveredSchema
from fetcher.services.connections.schema_cache import MAX_ENTRIES, SchemaCache

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = DiscoveredSchema(default_schema="public")


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_default_bound_is_one_thousand_entries() -> None:
    assert MAX_ENTRIES == 1000
    cache = SchemaCache(300)
    for n in range(MAX_ENTRIES * 3):
        cache.put("pg", [f"scope_{n}"], T0, SCHEMA)
    assert len(cache) == MAX_ENTRIES
    assert cache.get("pg", [f"scope_{MAX_ENTRIES * 3 - 1}"], T0) is SCHEMA
    assert cache.get("pg", [f"scope_{MAX_ENTRIES * 2 - 1}"], T0) is None


def test_the_least_recently_used_entry_goes_first() -> None:
    cache = SchemaCache(300, max_entries=3)
    for name in ("a", "b", "c"):
        cache.put(name, [], T0, SCHEMA)
    assert cache.get("a", [], T0) is SCHEMA  # "a" is now the most recently used
    cache.put("d", [], T0, SCHEMA)
    assert len(cache) == 3
    assert cache.get("b", [], T0) is None
    assert [cache.get(n, [], T0) is SCHEMA for n in ("a", "c", "d")] == [True, True, True]


def test_replacing_an_entry_does_not_evict_another() -> None:
    cache = SchemaCache(300, max_entries=2)
    cache.put("a", [], T0, SCHEMA)
    cache.put("b", [], T0, SCHEMA)
    cache.put("a", [], T0, DiscoveredSchema(default_schema="other"))
    assert len(cache) == 2
    assert cache.get("b", [], T0) is SCHEMA


def test_expired_entries_are_dropped_before_any_live_one() -> None:
    clock = Clock()
    cache = SchemaCache(10, clock=clock, max_entries=3)
    cache.put("old", [], T0, SCHEMA)
    clock.now = 5
    cache.put("live1", [], T0, SCHEMA)
    cache.put("live2", [], T0, SCHEMA)
    assert cache.get("old", [], T0) is SCHEMA  # most recently used, but about to expire
    clock.now = 10
    cache.put("new", [], T0, SCHEMA)
    assert len(cache) == 3
    assert [cache.get(n, [], T0) is SCHEMA for n in ("live1", "live2", "new")] == [True] * 3


def test_expired_entries_never_wait_for_a_lookup() -> None:
    clock = Clock()
    cache = SchemaCache(10, clock=clock)
    for n in range(50):
        cache.put("pg", [f"s{n}"], T0, SCHEMA)
    clock.now = 11
    cache.put("pg", ["fresh"], T0, SCHEMA)
    assert len(cache) == 1
