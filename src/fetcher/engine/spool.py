"""In-memory spools: the engine's default ``SpoolFactory`` (tests, embedding, small jobs).

The Worker replaces it with spools that move to disk, encrypted, past a memory bound (§4.3.1).
"""

from __future__ import annotations

from fetcher.engine.document import MemorySpool

__all__ = ["MemorySpool", "MemorySpoolFactory"]


class MemorySpoolFactory:
    """Creates :class:`MemorySpool` instances; remembers them for inspection in tests."""

    def __init__(self) -> None:
        self.created: list[MemorySpool] = []

    def create(self) -> MemorySpool:
        spool = MemorySpool()
        self.created.append(spool)
        return spool
