"""PostgreSQL under the contract suite: a fresh database and a reader role per session."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

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
from tests.contract.engines._common import (
    ALL_FAMILIES,
    closed_port,
    default_expected,
    fresh_name,
    fresh_password,
)
from tests.services import POSTGRES_ADMIN_DSN, service_missing

_TYPES = {
    TypeFamily.INTEGER: "bigint",
    TypeFamily.DECIMAL: "numeric(12, 2)",
    TypeFamily.FLOAT: "double precision",
    TypeFamily.BOOLEAN: "boolean",
    TypeFamily.TEXT: "text",
    TypeFamily.DATE: "date",
    TypeFamily.TIMESTAMP: "timestamp(6)",
    TypeFamily.TIMESTAMPTZ: "timestamptz",
    TypeFamily.TIME: "time(6)",
    TypeFamily.UUID: "uuid",
    TypeFamily.JSON: "jsonb",
    TypeFamily.BYTES: "bytea",
}


def _create(table: TableSpec) -> sql.Composed:
    columns = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(_TYPES[c.family]))
        for c in table.columns
    )
    return sql.SQL("CREATE TABLE public.{} ({})").format(sql.Identifier(table.name), columns)


def _param(value: object) -> object:
    return Jsonb(value) if isinstance(value, dict) else value


def _insert(conn: psycopg.Connection[tuple[object, ...]], table: TableSpec) -> None:
    if not table.rows:
        return
    names = [c.name for c in table.columns]
    target = sql.SQL("INSERT INTO public.{} ({})").format(
        sql.Identifier(table.name), sql.SQL(", ").join(map(sql.Identifier, names))
    )
    # A ``%`` inside an identifier would read as a placeholder (§3.4 "Rendering").
    statement = (
        target.as_string(conn).replace("%", "%%") + f" VALUES ({', '.join(['%s'] * len(names))})"
    )
    with conn.cursor() as cursor:
        cursor.executemany(statement, [[_param(row[n]) for n in names] for row in table.rows])


class PostgresEngine:
    name = "postgres"
    families = ALL_FAMILIES
    has_views = True
    case_insensitive_names = False
    collation = Collation()
    adjust = None

    def catalog_name(self, name: str) -> str:
        return name

    def expected(self, column: ColumnSpec, value: object) -> object:
        return default_expected(column, value)

    async def load(self, dataset: Dataset) -> LoadedDataset:
        try:
            admin = psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True, connect_timeout=5)
        except psycopg.OperationalError as exc:
            service_missing("PostgreSQL", exc)
            raise
        database, reader, password = fresh_name("ct_pg"), fresh_name("ct_reader"), fresh_password()
        with admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
            admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(reader), sql.Literal(password)
                )
            )
        base = psycopg.conninfo.conninfo_to_dict(POSTGRES_ADMIN_DSN)
        target = psycopg.conninfo.make_conninfo(POSTGRES_ADMIN_DSN, dbname=database)
        with psycopg.connect(target, autocommit=True) as conn:
            self._populate(conn, dataset, reader)
        descriptor = ConnectionDescriptor(
            config_name="contract",
            type=EngineType.POSTGRESQL,
            host=str(base.get("host", "127.0.0.1")),
            port=int(str(base.get("port", 5432))),
            database=database,
            username=reader,
            password=password,
        )
        return LoadedDataset(
            descriptor=descriptor,
            default_schema="public",
            dataset=dataset,
            hidden_tables=("contract_outside", "pg_lookalike"),
            # The server here trusts loopback clients: a wrong password is accepted, so the
            # wrong-password case cannot be shown against it.
            wrong_password=None,
            unreachable=replace(descriptor, port=closed_port()),
            secrets=(password,),
            state={"database": database, "reader": reader, "admin": base},
        )

    def _populate(
        self, conn: psycopg.Connection[tuple[object, ...]], dataset: Dataset, reader: str
    ) -> None:
        for table in dataset.tables:
            if table.is_view:
                continue
            conn.execute(_create(table))
            _insert(conn, table)
        conn.execute(
            sql.SQL(
                "INSERT INTO public.{} SELECT g, repeat('x', {}) FROM generate_series(1, {}) g"
            ).format(sql.Identifier(BULK), sql.Literal(BULK_PAD), sql.Literal(BULK_ROWS))
        )
        if dataset.view is not None:
            conn.execute(
                "CREATE VIEW public.contract_view AS SELECT id, txt FROM public.contract_items"
            )
        conn.execute("CREATE TABLE public.pg_lookalike (x integer)")
        conn.execute("CREATE SCHEMA contract_other")
        conn.execute("CREATE TABLE contract_other.contract_outside (x integer)")
        for schema in ("public", "contract_other"):
            conn.execute(
                sql.SQL(
                    "GRANT USAGE ON SCHEMA {0} TO {1};"
                    " GRANT SELECT ON ALL TABLES IN SCHEMA {0} TO {1}"
                ).format(sql.Identifier(schema), sql.Identifier(reader))
            )

    async def unload(self, loaded: LoadedDataset) -> None:
        with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(str(loaded.state["database"]))
                )
            )
            admin.execute(
                sql.SQL("DROP ROLE IF EXISTS {}").format(
                    sql.Identifier(str(loaded.state["reader"]))
                )
            )

    def registry(self, loaded: LoadedDataset, batch_size: int) -> ConnectorRegistry:
        return SqlConnectorRegistry(batch_size=batch_size)

    def _activity(self, loaded: LoadedDataset) -> Sequence[tuple[str | None, str | None]]:
        with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as admin:
            return admin.execute(
                "SELECT state, query FROM pg_stat_activity WHERE usename = %s AND datname = %s",
                [loaded.state["reader"], loaded.state["database"]],
            ).fetchall()

    async def assert_streaming(self, loaded: LoadedDataset) -> None:
        [(state, query)] = self._activity(loaded)
        assert state == "idle in transaction", state
        assert (query or "").upper().startswith("FETCH"), query

    async def open_sessions(self, loaded: LoadedDataset) -> int | None:
        return len(self._activity(loaded))


ENGINE = PostgresEngine()
