"""MemoryDeduplicator: first claim wins, bounded, expiring, released on failure."""

from __future__ import annotations

import pytest

from fetcher.consumer import Deduplicator, MemoryDeduplicator


async def test_first_claim_wins_and_repeats_are_duplicates() -> None:
    dedup = MemoryDeduplicator()
    assert isinstance(dedup, Deduplicator)
    assert await dedup.claim("fetcher.job.completed.a") is True
    assert await dedup.claim("fetcher.job.completed.a") is False
    assert await dedup.claim("fetcher.job.failed.a") is True


async def test_ttl_expires_and_bound_evicts_oldest() -> None:
    now = [0.0]
    dedup = MemoryDeduplicator(max_entries=3, ttl_seconds=10, clock=lambda: now[0])
    for name in "abc":
        assert await dedup.claim(name)
    now[0] = 5
    assert await dedup.claim("d")  # evicts "a"
    assert len(dedup) == 3
    assert await dedup.claim("a") is True  # "a" was evicted (bounded memory)
    assert await dedup.claim("d") is False
    now[0] = 12  # c (claimed at 0) expired; d and a (claimed at 5) still live
    assert await dedup.claim("b") is True
    assert await dedup.claim("a") is False


async def test_guard_releases_when_processing_fails() -> None:
    dedup = MemoryDeduplicator()

    async def process() -> None:
        async with dedup.guard("x") as fresh:
            assert fresh
            raise RuntimeError("processing failed")

    with pytest.raises(RuntimeError):
        await process()
    async with dedup.guard("x") as fresh:
        assert fresh  # redelivery after a failure is processed again
    async with dedup.guard("x") as fresh:
        assert not fresh


def test_bad_bounds() -> None:
    with pytest.raises(ValueError, match="positive"):
        MemoryDeduplicator(max_entries=0)
