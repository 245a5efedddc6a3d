"""SQLite under the contract suite: a fresh database file in its own allowed directory."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from dataclasses import replace
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path

from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.engine import ConnectionDescriptor, ConnectorRegistry
from fetcher.engine.types import EngineType, TypeFamily
from tests.contract.dataset import (
    BULK,
    BULK_PAD,
    BULK_ROWS,
    Collation,
    ColumnSpec,
    Dataset,
    TableSpec,
)
from tests.contract.engines import LoadedDataset
from tests.contract.engines._common import default_expected

#: Declared types whose affinity (and the connector's declared-type rules) give each family.
_TYPES = {
    TypeFamily.INTEGER: "INTEGER",
    TypeFamily.DECIMAL: "DECIMAL(12, 2)",
    TypeFamily.FLOAT: "REAL",
    TypeFamily.BOOLEAN: "BOOLEAN",
    TypeFamily.TEXT: "TEXT",
    TypeFamily.DATE: "DATE",
    TypeFamily.TIMESTAMP: "DATETIME",
    TypeFamily.TIME: "TIME",
    TypeFamily.BYTES: "BLOB",
}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _stored(value: object) -> object:
    """How the plugin writes a canonical value: temporal values in Python's ISO text forms
    (the forms the connector binds filter values in), decimals as their text."""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def _create(db: sqlite3.Connection, table: TableSpec) -> None:
    columns = ", ".join(f"{_quote(c.name)} {_TYPES[c.family]}" for c in table.columns)
    db.execute(f"CREATE TABLE {_quote(table.name)} ({columns})")
    if table.rows:
        names = [c.name for c in table.columns]
        marks = ", ".join("?" * len(names))
        db.executemany(
            f"INSERT INTO {_quote(table.name)} VALUES ({marks})",
            [[_stored(row[n]) for n in names] for row in table.rows],
        )


class SqliteEngine:
    name = "sqlite"
    families = frozenset(_TYPES)
    has_views = True
    case_insensitive_names = True
    #: ``=`` uses the BINARY collation; ``LIKE`` folds ASCII letters.
    collation = Collation(eq_case_insensitive=False, like_case_insensitive=True)
    adjust = None

    def catalog_name(self, name: str) -> str:
        return name

    def expected(self, column: ColumnSpec, value: object) -> object:
        """SQLite has no time type: a TIME column returns the text as stored."""
        if isinstance(value, time):
            return value.isoformat()
        return default_expected(column, value)

    async def load(self, dataset: Dataset) -> LoadedDataset:
        directory = Path(tempfile.mkdtemp(prefix="ct_sqlite_"))
        path = directory / "contract.sqlite"
        db = sqlite3.connect(path)
        try:
            for table in dataset.tables:
                if not table.is_view:
                    _create(db, table)
            db.executemany(
                f"INSERT INTO {BULK} VALUES (?, ?)",
                [(n, "x" * BULK_PAD) for n in range(1, BULK_ROWS + 1)],
            )
            if dataset.view is not None:
                db.execute("CREATE VIEW contract_view AS SELECT id, txt FROM contract_items")
            db.commit()
        finally:
            db.close()
        descriptor = ConnectionDescriptor(
            config_name="contract", type=EngineType.SQLITE, database=str(path)
        )
        return LoadedDataset(
            descriptor=descriptor,
            default_schema="main",
            dataset=dataset,
            unreachable=replace(descriptor, database=str(directory / "missing.sqlite")),
            state={"directory": str(directory)},
        )

    async def unload(self, loaded: LoadedDataset) -> None:
        shutil.rmtree(str(loaded.state["directory"]), ignore_errors=True)

    def registry(self, loaded: LoadedDataset, batch_size: int) -> ConnectorRegistry:
        return SqlConnectorRegistry(
            sqlite_allowed_dir=str(loaded.state["directory"]), batch_size=batch_size
        )

    async def assert_streaming(self, loaded: LoadedDataset) -> None:
        """An embedded file has no server: ``fetchmany`` on one cursor is the stream."""

    async def open_sessions(self, loaded: LoadedDataset) -> int | None:
        return None


ENGINE = SqliteEngine()
