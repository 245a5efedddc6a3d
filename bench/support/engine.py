"""What the in-process engine benchmarks share: descriptors of the local PostgreSQL and MariaDB
servers (for the databases :mod:`bench.support.databases` creates) and a sink that keeps
nothing."""

from __future__ import annotations

from fetcher.engine import ConnectionDescriptor
from fetcher.engine.kit import EngineType


def postgres_descriptor(database: str, name: str = "pg") -> ConnectionDescriptor:
    """The datasource ``name``: ``database`` on 127.0.0.1:5432 as ``postgres`` (trust auth)."""
    return ConnectionDescriptor(
        config_name=name,
        type=EngineType.POSTGRESQL,
        host="127.0.0.1",
        port=5432,
        database=database,
        username="postgres",
    )


def mariadb_descriptor(
    database: str, reader: str, password: str, name: str = "maria"
) -> ConnectionDescriptor:
    """The datasource ``name``: ``database`` on 127.0.0.1:3306 as its reader."""
    return ConnectionDescriptor(
        config_name=name,
        type=EngineType.MYSQL,
        host="127.0.0.1",
        port=3306,
        database=database,
        username=reader,
        password=password,
    )


class NullSink:
    """A ``ResultSink`` that keeps nothing."""

    async def write(self, chunk: bytes) -> None:
        return None
