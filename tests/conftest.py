"""Shared fixtures: a fresh PostgreSQL database per test session."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from tests.services import POSTGRES_ADMIN_DSN, service_missing


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A libpq DSN for a brand-new database (datasource tables), dropped at session end."""
    yield from _fresh_database("src")


@pytest.fixture(scope="session")
def metadata_dsn() -> Iterator[str]:
    """A separate brand-new database for metadata stores, so their tables never show up in
    a datasource's discovery."""
    yield from _fresh_database("meta")


def _fresh_database(purpose: str) -> Iterator[str]:
    import psycopg

    try:
        admin = psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        service_missing("PostgreSQL", exc)
        raise  # unreachable: service_missing always raises
    name = f"fetcher_test_{purpose}_{secrets.token_hex(4)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = psycopg.conninfo.conninfo_to_dict(POSTGRES_ADMIN_DSN)
    base["dbname"] = name
    try:
        yield psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in base.items()})
    finally:
        with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
