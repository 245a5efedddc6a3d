"""The SQLite test database: mixed types, a view, mixed-case names, ``sqlite_*`` objects."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fetcher.engine.model import ConnectionDescriptor
from fetcher.engine.types import EngineType

SCHEMA = """
CREATE TABLE "Accounts" (
    id INTEGER PRIMARY KEY,
    "Name" TEXT,
    amount DECIMAL(10, 2),
    ratio REAL,
    active BOOLEAN,
    born DATE,
    seen DATETIME,
    at TIME,
    payload BLOB,
    misc,
    big NUMERIC
);
CREATE VIEW active_accounts AS SELECT id, "Name" FROM "Accounts" WHERE active = 1;
CREATE TABLE counters (id INTEGER PRIMARY KEY AUTOINCREMENT, n INT);
INSERT INTO counters (n) VALUES (1);
CREATE TABLE numbers (n INTEGER);
"""

ACCOUNTS = [
    (
        1,
        "Ann",
        "1500.00",
        0.5,
        1,
        "2024-01-05",
        "2024-01-05 10:00:00",
        "10:00:00",
        b"\x00\xff",
        7,
        12.5,
    ),
    (2, "bob", "1,500.00", 1.25, 0, "2024-02-10", "2024-02-10 23:59:59", "23:59:59", None, "x", 3),
    (3, "Álvaro", None, None, None, None, None, None, None, None, None),
    (
        4,
        "100%",
        "12.5",
        float("inf"),
        1,
        "2024-03-01",
        "2024-03-01 00:00:00",
        "00:00:00",
        b"",
        1.5,
        1e20,
    ),
]


def build_database(path: Path) -> None:
    """Create the test database at ``path`` (and close it)."""
    db = sqlite3.connect(path)
    try:
        db.executescript(SCHEMA)
        db.executemany('INSERT INTO "Accounts" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', ACCOUNTS)
        db.executemany("INSERT INTO numbers VALUES (?)", [(i,) for i in range(25)])
        db.commit()
    finally:
        db.close()


def descriptor(path: Path | str) -> ConnectionDescriptor:
    return ConnectionDescriptor(config_name="local", type=EngineType.SQLITE, database=str(path))
