"""Engine plugins of the shared connector contract suite (see ``tests/contract/README.md``).

A plugin is a module in this package exposing ``ENGINE``, an object satisfying
:class:`ContractEngine`. Plugins are found by listing the package, so adding an engine is adding
one file; nothing here needs editing. Every test in ``tests/contract`` runs once per plugin.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from fetcher.engine import ConnectionDescriptor, ConnectorRegistry
from fetcher.engine.types import TypeFamily
from tests.contract.dataset import Collation, ColumnSpec, Dataset

__all__ = ["ContractEngine", "LoadedDataset", "discover_engines"]


@dataclass(frozen=True, slots=True)
class LoadedDataset:
    """What ``load`` created: how to reach it, and the facts the tests check against.

    * ``descriptor``: a connection of a (non-admin) reader, with a password where the engine
      has authentication; its ``config_name`` is the datasource key of the test requests.
    * ``default_schema``: the engine default ``d`` of §3.3 as the server reports it (``public``,
      the database name, ``main``…), or ``None`` where table keys are never split (MongoDB).
    * ``hidden_tables``: names the plugin created that discovery MUST NOT return — objects
      outside the discovery scope (another schema/database) and system-object look-alikes
      (``pg_*`` tables). Empty when the engine has neither.
    * ``wrong_password``: the descriptor with a wrong password, or ``None`` (no authentication).
    * ``unreachable``: a descriptor nothing answers (a closed port; a missing file for SQLite).
    * ``secrets``: strings that must never appear in an error message or detail.
    * ``state``: anything the plugin needs later (admin handles, paths); the tests ignore it.
    """

    descriptor: ConnectionDescriptor
    default_schema: str | None
    dataset: Dataset
    hidden_tables: tuple[str, ...] = ()
    wrong_password: ConnectionDescriptor | None = None
    unreachable: ConnectionDescriptor | None = None
    secrets: tuple[str, ...] = ()
    state: dict[str, object] = field(default_factory=dict)


class ContractEngine(Protocol):
    """One engine under the contract suite.

    Class attributes:
    * ``name``: the pytest parameter id (``postgres``, ``mariadb``…);
    * ``families``: the §11.4 families it can store (the dataset keeps only those columns);
    * ``has_views``: whether the engine has views (a ``contract_view`` is created and must be
      discovered);
    * ``case_insensitive_names``: §3.2/§3.3 table and field matching (MySQL, SQLite);
    * ``collation``: how ``=`` and ``LIKE`` treat letter case on text columns (§3.4);
    * ``adjust``: optional canonical value → stored value (Oracle ``''`` → NULL…), or ``None``.
    """

    name: str
    families: frozenset[TypeFamily]
    has_views: bool
    case_insensitive_names: bool
    collation: Collation
    adjust: Callable[[ColumnSpec, object], object] | None

    def catalog_name(self, name: str) -> str:
        """The catalog spelling of a canonical dataset name (identity, except where the engine
        canonicalizes, e.g. Oracle upper-case)."""
        ...

    async def load(self, dataset: Dataset) -> LoadedDataset:
        """Create ``dataset`` natively in a FRESH database/schema (never shared with another
        session) plus a reader with a password, and return how to reach it. When the server is
        missing, call ``tests.services.service_missing`` (fails in CI, skips elsewhere); a suite
        gated on an environment variable calls ``pytest.skip`` with that variable's name."""
        ...

    async def unload(self, loaded: LoadedDataset) -> None:
        """Drop everything ``load`` created (called once, at session end)."""
        ...

    def registry(self, loaded: LoadedDataset, batch_size: int) -> ConnectorRegistry:
        """The production registry that builds this engine's connector with ``batch_size``."""
        ...

    def expected(self, column: ColumnSpec, value: object) -> object:
        """The JSON value (as ``json.loads`` gives it) a stored value must come back as;
        usually ``tests.contract.dataset.expected_json(column.family, value)``."""
        ...

    async def assert_streaming(self, loaded: LoadedDataset) -> None:
        """Called while a ``contract_bulk`` stream is paused after its first batch: prove, from
        ANOTHER session, that the rows are read through a server-side cursor and not fetched
        whole (PostgreSQL: the reader's backend last ran a ``FETCH``; MySQL: the ``SELECT`` is
        still running). A no-op where there is no server to observe (SQLite: ``fetchmany`` on one
        cursor is the stream); the batch-count assertions still apply."""
        ...

    async def open_sessions(self, loaded: LoadedDataset) -> int | None:
        """How many server sessions the reader holds now, seen from another session; ``None``
        where the engine has no server sessions (SQLite)."""
        ...


def discover_engines() -> list[ContractEngine]:
    """Every plugin module's ``ENGINE``, sorted by name."""
    engines: list[ContractEngine] = []
    for module in pkgutil.iter_modules(__path__):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        engine = getattr(loaded, "ENGINE", None)
        if engine is not None:
            engines.append(engine)
    return sorted(engines, key=lambda e: e.name)
