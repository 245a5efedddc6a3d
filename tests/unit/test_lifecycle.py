"""``AsyncResource``: ``async with`` opens, and closes on every exit (ARCHITECTURE example 7)."""

from __future__ import annotations

import pytest

from fetcher.lifecycle import AsyncResource


class _Recorder(AsyncResource):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def open(self) -> None:
        self.calls.append("open")

    async def close(self) -> None:
        self.calls.append("close")


class _NothingToOpen(AsyncResource):
    closed = 0

    async def close(self) -> None:
        self.closed += 1


async def test_entry_opens_and_returns_the_resource_and_exit_closes() -> None:
    resource = _Recorder()
    async with resource as entered:
        assert entered is resource
        assert resource.calls == ["open"]
    assert resource.calls == ["open", "close"]


async def test_a_body_that_raises_still_closes_and_the_error_propagates() -> None:
    resource = _Recorder()
    with pytest.raises(LookupError):
        async with resource:
            raise LookupError("body failed")
    assert resource.calls == ["open", "close"]


async def test_the_default_open_does_nothing() -> None:
    async with _NothingToOpen() as resource:
        assert resource.closed == 0
    assert resource.closed == 1


def test_a_subclass_without_close_cannot_be_made() -> None:
    class _NoClose(AsyncResource):
        pass

    with pytest.raises(TypeError):
        _NoClose()  # type: ignore[abstract]
