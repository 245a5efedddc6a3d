"""The demo's sample datasource: a small ledger in SQLite, built deterministically."""

from __future__ import annotations

import json
import random
import sqlite3
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

__all__ = ["LEDGER_ROWS", "build_sample_database"]

LEDGER_ROWS = 3000
_ACCOUNTS = [
    ("1000", "Cash", "2024-01-01", 1),
    ("1100", "Receivables", "2024-01-01", 1),
    ("2000", "Payables", "2024-02-15", 1),
    ("4000", "Revenue", "2024-03-01", 1),
    ("5000", "Travel", "2024-03-01", 0),
]
_CURRENCIES = ["USD", "EUR", "BRL"]
_MEMOS = [None, "invoice 'Q1'", "café ☕ refund", 'tab\there, "quoted"', "line\nbreak"]

_SCHEMA = """
CREATE TABLE accounts (code TEXT PRIMARY KEY, name TEXT NOT NULL, opened DATE, active BOOLEAN);
CREATE TABLE ledger (
    id INTEGER PRIMARY KEY,
    account TEXT NOT NULL REFERENCES accounts(code),
    amount DECIMAL(18, 2) NOT NULL,
    currency TEXT NOT NULL,
    booked_at TIMESTAMP NOT NULL,
    memo TEXT,
    attributes TEXT
);
CREATE TABLE archived_entries (id INTEGER PRIMARY KEY, note TEXT);
"""


def _ledger_row(rng: random.Random, index: int) -> tuple[object, ...]:
    amount = Decimal(rng.randint(-50_000, 250_000)) / 100
    booked = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=rng.randint(0, 60 * 24 * 300))
    attributes = json.dumps({"batch": index // 100, "tags": rng.sample(["a", "b", "c"], 2)})
    return (
        index,
        rng.choice(_ACCOUNTS)[0],
        f"{amount:.2f}",
        rng.choice(_CURRENCIES),
        booked.strftime("%Y-%m-%d %H:%M:%S"),
        rng.choice(_MEMOS),
        attributes if index % 7 else None,
    )


def build_sample_database(path: Path) -> None:
    """Write the sample database at ``path`` (replacing any old one)."""
    path.unlink(missing_ok=True)
    rng = random.Random(7)  # noqa: S311 - sample data, not security
    with sqlite3.connect(path) as db:
        db.executescript(_SCHEMA)
        db.executemany("INSERT INTO accounts VALUES (?, ?, ?, ?)", _ACCOUNTS)
        db.executemany(
            "INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?)",
            (_ledger_row(rng, i) for i in range(1, LEDGER_ROWS + 1)),
        )
    db.close()
