"""§2.7 schema cache: TTL, updatedAt matching, invalidation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fetcher.engine.types import DiscoveredSchema
from fetcher.services.connections.schema_cache import SchemaCache

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = DiscoveredSchema(default_schema="public")


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_hit_miss_and_ttl() -> None:
    clock = Clock()
    cache = SchemaCache(300, clock=clock)
    cache.put("pg", ["public"], T0, SCHEMA)
    assert cache.get("pg", ["public"], T0) is SCHEMA
    assert cache.get("pg", ["other"], T0) is None
    clock.now = 300
    assert cache.get("pg", ["public"], T0) is None


def test_scope_order_does_not_matter() -> None:
    cache = SchemaCache(300)
    cache.put("pg", ["b", "a"], T0, SCHEMA)
    assert cache.get("pg", ["a", "b"], T0) is SCHEMA


def test_updated_at_mismatch_ignores_the_entry() -> None:
    cache = SchemaCache(300)
    cache.put("pg", [], T0, SCHEMA)
    assert cache.get("pg", [], T0 + timedelta(milliseconds=1)) is None
    assert len(cache) == 0


def test_invalidate_and_disabled() -> None:
    cache = SchemaCache(300)
    cache.put("a", [], T0, SCHEMA)
    cache.put("a", ["x"], T0, SCHEMA)
    cache.put("b", [], T0, SCHEMA)
    cache.invalidate("a")
    assert len(cache) == 1
    off = SchemaCache(0)
    off.put("a", [], T0, SCHEMA)
    assert off.get("a", [], T0) is None
