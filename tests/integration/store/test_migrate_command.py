"""``fetcher migrate`` as a process (contract §15.4): the migration lock it shares with a
starting Manager, ``--check``/``--dry-run``, exit codes, and what it never prints."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from fetcher.adapters.store._common import load_migrations
from fetcher.adapters.store.postgres import MIGRATION_LOCK_KEY
from tests.conftest import _fresh_database

pytestmark = pytest.mark.integration

FETCHER = str(Path(sys.executable).with_name("fetcher"))
ALL = [m.name for m in load_migrations("postgres")]
#: The shipped versions (numbers are reserved per change, so they may have gaps) and the head.
VERSIONS = [m.version for m in load_migrations("postgres")]
HEAD = VERSIONS[-1]


def url_of(conninfo: str) -> str:
    parts = psycopg.conninfo.conninfo_to_dict(conninfo)
    user = parts.get("user", "postgres")
    auth = f"{user}:{parts['password']}" if parts.get("password") else str(user)
    host, port = parts.get("host", "127.0.0.1"), parts.get("port", 5432)
    return f"postgresql://{auth}@{host}:{port}/{parts['dbname']}"


def migrate(database_url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - our own console script, fixed argv
        [FETCHER, "migrate", *args],
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "DATABASE_URL": database_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(database_url: str, *args: str) -> tuple[int, str, str]:
    process = migrate(database_url, *args)
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


@pytest.fixture
def dsn() -> Iterator[str]:
    yield from _fresh_database("migrate")


def ledger(conninfo: str) -> list[int] | None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,):
            return None
        rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
        return [row[0] for row in rows]


def test_migrate_waits_for_the_migration_lock_a_starting_process_holds(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        process = migrate(url_of(dsn))
        try:
            time.sleep(3)
            assert process.poll() is None, process.communicate()
            assert ledger(dsn) is None  # nothing applied while the lock is held
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, out + err
    assert out.splitlines() == [f"applied {name}" for name in ALL] + [
        f"metadata store schema at version {HEAD} ({len(ALL)} migrations applied)"
    ]
    assert ledger(dsn) == VERSIONS


def test_check_lists_the_pending_migrations_and_changes_nothing(dsn: str) -> None:
    [first] = [m for m in load_migrations("postgres") if m.version == 1]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(first.sql.encode())
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        conn.execute("INSERT INTO schema_migrations VALUES (1, %s)", (first.name,))
    for flag in ("--check", "--dry-run"):
        code, out, err = run(url_of(dsn), flag)
        assert (code, err) == (3, "")
        assert out.splitlines() == [f"pending {name}" for name in ALL[1:]] + [
            f"metadata store schema at version 1 ({len(ALL) - 1} migrations pending)"
        ]
    assert ledger(dsn) == [1]
    assert run(url_of(dsn))[0] == 0
    assert run(url_of(dsn), "--check") == (
        0,
        f"metadata store schema at version {HEAD} (up to date)\n",
        "",
    )


def test_a_version_only_a_newer_release_knows_is_named_on_stderr(dsn: str) -> None:
    assert run(url_of(dsn))[0] == 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (9001, '9001_from_the_future.sql')")
    code, out, err = run(url_of(dsn), "--check")
    assert code == 0
    assert out == f"metadata store schema at version {HEAD} (up to date)\n"
    assert "does not ship (9001)" in err


def test_an_unusable_url_fails_without_printing_it(tmp_path: Path) -> None:
    secret = "s3cr3t-Pw-that-must-not-show"
    assert run("mysql://root:x@127.0.0.1/db") == (
        1,
        "",
        "migrate failed: unsupported DATABASE_URL scheme\n",
    )
    assert run("") == (1, "", "migrate failed: DATABASE_URL is required\n")
    code, out, err = run(f"postgresql://fetcher:{secret}@127.0.0.1:1/nowhere")
    assert (code, out) == (1, "")
    assert err.endswith("migrate failed: metadata store unavailable: PoolTimeout\n")
    assert secret not in err
    assert run(f"sqlite:///{tmp_path / 'meta.db'}", "--check")[0] == 3
    assert (tmp_path / "meta.db").stat().st_mode & 0o777 == 0o600  # created empty, as a start
    assert ledger_absent(tmp_path / "meta.db")


def ledger_absent(path: Path) -> bool:
    import sqlite3

    with sqlite3.connect(path) as conn:
        found = conn.execute("SELECT name FROM sqlite_master WHERE name = 'schema_migrations'")
        return found.fetchone() is None
