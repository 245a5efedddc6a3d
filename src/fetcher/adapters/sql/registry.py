"""The connector registry over the SQL adapters (the engine's ``ConnectorRegistry`` port)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fetcher.adapters.jsonlayout import BatchEncoder
from fetcher.adapters.sql.sqlite import SqliteConnector
from fetcher.engine import ConnectionDescriptor, Connector, EngineError, ErrorCategory
from fetcher.engine.kit import EngineType

__all__ = ["SqlConnectorRegistry"]


class SqlConnectorRegistry:
    """Builds unopened connectors by type.

    ``sqlite_allowed_dir`` confines stored ``SQLITE`` connections (§2.5.1); internal ones are
    operator-configured and not confined, but ``forbidden_paths`` (the metadata store file)
    is always refused. Every driver-backed engine's module is imported lazily (PostgreSQL
    included), so a build without one driver's extra still serves the rest: embedded mode on
    SQLite runs without the ``postgres`` extra.
    A descriptor's ``pinned_address`` (the SSRF pre-dial's vetted IP, §2.9.1) is handed to the
    connector so that the driver dials it instead of resolving the host again. ``encoder``
    (the host's :class:`~fetcher.adapters.jsonlayout.encoder_process.BatchEncoder`, if it runs one)
    is handed to the PostgreSQL connector, which encodes its batches there.
    """

    def __init__(
        self,
        *,
        sqlite_allowed_dir: str | None = None,
        forbidden_paths: Sequence[str] = (),
        batch_size: int = 2_000,
        encoder: BatchEncoder | None = None,
    ) -> None:
        self._sqlite_allowed_dir = sqlite_allowed_dir
        self._forbidden = tuple(forbidden_paths)
        self._batch_size = batch_size
        self._encoder = encoder

    def connector_for(self, connection: ConnectionDescriptor) -> Connector:
        if connection.type is EngineType.POSTGRESQL:
            from fetcher.adapters.sql.postgres import PostgresConnector

            return PostgresConnector(
                connection,
                batch_size=self._batch_size,
                pinned_address=connection.pinned_address,  # §2.9.1 rule 3 (hostaddr)
                encoder=self._encoder,
            )
        if connection.type is EngineType.SQLITE:
            if not connection.internal and self._sqlite_allowed_dir is None:
                raise EngineError(
                    ErrorCategory.CONNECT,
                    f"failed to connect to datasource '{connection.config_name}'",
                    detail="SQLITE connections are disabled",
                )
            return SqliteConnector(
                connection,
                allowed_dir=None if connection.internal else self._sqlite_allowed_dir,
                forbidden_paths=self._forbidden,
                batch_size=self._batch_size,
            )
        if connection.type is EngineType.MYSQL:
            from fetcher.adapters.sql.mysql import MysqlConnector

            return self._dialing(MysqlConnector, connection)
        if connection.type is EngineType.MONGODB:
            from fetcher.adapters.mongodb import MongoConnector

            return self._dialing(MongoConnector, connection)
        if connection.type is EngineType.SQL_SERVER:
            from fetcher.adapters.sql.sqlserver import SqlServerConnector

            return self._dialing(SqlServerConnector, connection)
        if connection.type is EngineType.ORACLE:
            from fetcher.adapters.sql.oracle import OracleConnector

            return self._dialing(OracleConnector, connection)
        raise EngineError(
            ErrorCategory.VALIDATION, f"datasource type {connection.type.value} is not supported"
        )

    def _dialing(
        self, connector: Callable[..., Connector], connection: ConnectionDescriptor
    ) -> Connector:
        """A networked engine's connector, which dials the pinned address (§2.9.1 rule 3)."""
        return connector(
            connection, batch_size=self._batch_size, pinned_address=connection.pinned_address
        )
