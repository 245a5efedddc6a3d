"""Scratch databases on the machine's PostgreSQL and MariaDB servers, created for one run and
dropped after it (``try``/``finally`` around their use), and a few reads of the PostgreSQL
server (its postmaster's PID, one value of a query)."""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path
from typing import Any

import psycopg

from bench.support.services import ADMIN

MARIADB_ROOT = ["mariadb", "-h", "127.0.0.1", "-P", "3306", "-u", "root"]


def create_postgres(prefix: str, sql: str) -> str:
    """A scratch PostgreSQL database holding ``sql``'s objects; returns its name."""
    name = f"fetcher_bench_{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        conninfo = psycopg.conninfo.make_conninfo(ADMIN, dbname=name)
        with psycopg.connect(conninfo, autocommit=True) as db:
            db.execute(sql.encode())
    except BaseException:
        drop_postgres(name)
        raise
    return name


def drop_postgres(name: str) -> None:
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def admin_address() -> tuple[str, int]:
    """Host and port of the bench's PostgreSQL server (``FETCHER_BENCH_POSTGRES_DSN``)."""
    params = psycopg.conninfo.conninfo_to_dict(ADMIN)
    return str(params.get("host", "127.0.0.1")), int(str(params.get("port", 5432)))


def postmaster_pid() -> int:
    """The PID of the bench's PostgreSQL server (the parent of a backend)."""
    with psycopg.connect(ADMIN, dbname="postgres", autocommit=True) as db:
        row = db.execute(b"SELECT pg_backend_pid()").fetchone()
        assert row is not None
        # read while the backend lives: it exits with this connection
        fields = Path(f"/proc/{row[0]}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])


def postgres_scalar(database: str, sql: str) -> Any:
    with psycopg.connect(ADMIN, dbname=database, autocommit=True) as db:
        row = db.execute(sql.encode()).fetchone()
    return None if row is None else row[0]


def create_mariadb(sql: str) -> tuple[str, str, str]:
    """A scratch MariaDB database with ``sql``'s objects and a reader with a password."""
    name = f"fetcher_bench_{secrets.token_hex(4)}"
    reader, password = f"bench_{secrets.token_hex(4)}", secrets.token_hex(12)
    script = (
        f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4; USE `{name}`; {sql}\n"
        f"CREATE USER '{reader}'@'%' IDENTIFIED BY '{password}';\n"
        f"GRANT SELECT ON `{name}`.* TO '{reader}'@'%';\n"
    )
    try:
        subprocess.run(MARIADB_ROOT, input=script, text=True, check=True, capture_output=True)
    except BaseException:
        drop_mariadb(name, reader)
        raise
    return name, reader, password


def drop_mariadb(name: str, reader: str) -> None:
    script = f"DROP DATABASE IF EXISTS `{name}`; DROP USER IF EXISTS '{reader}'@'%';"
    subprocess.run(MARIADB_ROOT, input=script, text=True, check=False, capture_output=True)
