"""Fakes for the unit tier of the services ring (the engine's are in ``fetcher.engine.testing``).

* :class:`FakeDns` stands in for :func:`fetcher.services.connections.ssrf.resolve_host`, the one
  function
  that resolves a datasource host (§2.9.1): a fixed answer per name, else a resolver error.
* :class:`RecordingPublisher` is a ``WorkPublisher`` and an ``EventPublisher`` that records what
  it is given and can be told to fail, as a broker that cannot be reached would.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["FakeDns", "RecordingPublisher"]


@dataclass
class FakeDns:
    """A resolver with fixed answers. ``calls`` records each lookup as ``(host, port)``, or as
    ``host`` alone when ``with_port`` is false. The error names the host, as a real resolver's
    does, so tests can check that it is redacted (§8.7)."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    calls: list[object] = field(default_factory=list)
    with_port: bool = True

    async def __call__(self, host: str, port: int | None) -> list[str]:
        self.calls.append((host, port) if self.with_port else host)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, f"Name or service not known: {host}")
        return list(self.answers[host])


@dataclass
class RecordingPublisher:
    """WorkPublisher and EventPublisher; ``fail`` makes the next publishes raise."""

    work: list[tuple[bytes, dict[str, str | int]]] = field(default_factory=list)
    events: list[tuple[str, bytes, dict[str, str]]] = field(default_factory=list)
    fail: bool = False

    @property
    def published(self) -> list[tuple[bytes, dict[str, str | int]]]:
        """The work messages published so far (the same list as :attr:`work`)."""
        return self.work

    async def publish_work(self, body: bytes, headers: Mapping[str, str | int]) -> None:
        if self.fail:
            raise ConnectionError("broker unreachable")
        self.work.append((body, dict(headers)))

    async def publish_event(
        self, routing_key: str, body: bytes, headers: Mapping[str, str]
    ) -> None:
        if self.fail:
            raise ConnectionError("broker unreachable")
        self.events.append((routing_key, body, dict(headers)))
