"""Issue 24: a hostile source's catalog or result answer of a shape a connector does not expect
(one int column where six are expected, a name that is a number) fails the discovery or the
query with the §4.5 text naming the column — never an unpacking error that escapes as
"internal error" (a job) or ``500 FET-0002`` (``GET …/schema``). One fake answer per engine,
given to the function that unpacks that engine's catalog (MySQL: its whole ``discover``,
through a fake asyncmy connection, since it runs three catalog queries). MongoDB's are in
tests/unit/mongodb/test_connector_units.py, beside its listing fake."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from fetcher.adapters.sql import mysql, oracle, postgres, sqlite, sqlserver
from fetcher.adapters.sql._common import result_columns, transposed
from fetcher.engine import ConnectionDescriptor, EngineError, ErrorCategory
from fetcher.engine.kit import EngineType

DS = "hostile"
DISCOVERY = f"failed to discover datasource schema '{DS}'"
QUERY = f"failed to query datasource '{DS}'"

#: engine → (the function that unpacks its catalog rows, the columns its text must name)
CATALOGS: dict[str, tuple[Callable[[Sequence[Any], str], object], str]] = {
    "postgres": (
        postgres._tables_from,
        "(table_schema, table_name, column_name, data_type, udt_name, is_enum)",
    ),
    "sqlserver": (sqlserver.tables_from, "(TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE)"),
    "oracle": (oracle.tables_from, "(OWNER, TABLE_NAME, COLUMN_NAME, DATA_TYPE, DATA_SCALE)"),
    "sqlite": (sqlite._tables_from, "(name, column name, type)"),
}


def _failure(call: Callable[[], object]) -> EngineError:
    with pytest.raises(EngineError) as caught:
        call()
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    return caught.value


@pytest.mark.parametrize("engine", sorted(CATALOGS))
def test_one_int_column_where_more_are_expected_is_a_discovery_failure(engine: str) -> None:
    unpack, named = CATALOGS[engine]
    error = _failure(lambda: unpack([(7,)], DS))
    width = named.count(",") + 1
    assert error.text() == (
        f"{DISCOVERY}: the catalog answered a row of 1 value(s) where {width} are expected {named}"
    )


@pytest.mark.parametrize("engine", sorted(CATALOGS))
def test_a_table_name_that_is_a_number_names_its_column(engine: str) -> None:
    unpack, named = CATALOGS[engine]
    width = named.count(",") + 1
    good = {
        "postgres": ("public", "t", "c", "integer", "int4", False),
        "sqlserver": ("dbo", "t", "c", "int"),
        "oracle": ("HR", "T", "C", "NUMBER", 0),
        "sqlite": ("t", "c", "INTEGER"),
    }[engine]
    assert len(good) == width
    assert unpack([good], DS)  # the expected shape passes
    column = named.strip("()").split(", ")[1]
    error = _failure(lambda: unpack([(good[0], 42, *good[2:])], DS))
    assert error.text() == f"{DISCOVERY}: the catalog column '{column}' holds a int value"


class _FakeMysqlCursor:
    """Answers each asyncmy query with the rows the test chose for its first words."""

    def __init__(self, answers: dict[str, list[tuple[Any, ...]]]) -> None:
        self.answers = answers
        self.pending: list[tuple[Any, ...]] = []

    async def __aenter__(self) -> _FakeMysqlCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def execute(self, sql: str, params: object = None) -> None:
        key = next(k for k in self.answers if k in sql)
        self.pending = self.answers[key]

    async def fetchall(self) -> list[tuple[Any, ...]]:
        return self.pending


class _FakeMysqlConnection:
    connected = True
    server_version = "11.4.2-MariaDB"

    def __init__(self, answers: dict[str, list[tuple[Any, ...]]]) -> None:
        self._cursor = _FakeMysqlCursor(answers)

    def cursor(self, *args: object) -> _FakeMysqlCursor:
        return self._cursor


def _mysql(answers: dict[str, list[tuple[Any, ...]]]) -> mysql.MysqlConnector:
    descriptor = ConnectionDescriptor(
        config_name=DS, type=EngineType.MYSQL, host="127.0.0.1", port=3306, database="app"
    )
    connector = mysql.MysqlConnector(descriptor)
    connector._conn = _FakeMysqlConnection(answers)
    return connector


GOOD_MYSQL: dict[str, list[tuple[Any, ...]]] = {
    "SELECT DATABASE()": [("app",)],
    "COLUMN_NAME": [("t", "c", "int")],
    "CHECK_CLAUSE": [("t", "json_valid(`c`)")],
    "SELECT t.TABLE_NAME FROM": [("t",)],
}


async def test_mysql_discovery_of_the_expected_shapes_passes() -> None:
    schema = await _mysql(GOOD_MYSQL).discover([])
    assert [table.name for table in schema.tables] == ["t"]


@pytest.mark.parametrize(
    ("query", "answer", "detail"),
    [
        (
            "COLUMN_NAME",
            [(7,)],
            "the catalog answered a row of 1 value(s) where 3 are expected "
            "(TABLE_NAME, COLUMN_NAME, DATA_TYPE)",
        ),
        ("COLUMN_NAME", [("t", 5, "int")], "the catalog column 'COLUMN_NAME' holds a int value"),
        (
            "CHECK_CLAUSE",
            [(1, 2, 3)],
            "the catalog answered a row of 3 value(s) where 2 are expected "
            "(TABLE_NAME, CHECK_CLAUSE)",
        ),
        (
            "SELECT DATABASE()",
            [()],
            "the catalog answered a row of 0 value(s) where 1 are expected (DATABASE())",
        ),
    ],
)
async def test_mysql_discovery_of_another_shape_names_the_column(
    query: str, answer: list[tuple[Any, ...]], detail: str
) -> None:
    connector = _mysql({**GOOD_MYSQL, query: answer})
    with pytest.raises(EngineError) as caught:
        await connector.discover([])
    assert caught.value.text() == f"{DISCOVERY}: {detail}"


async def test_mysql_named_discovery_checks_the_table_name_list() -> None:
    connector = _mysql({**GOOD_MYSQL, "SELECT t.TABLE_NAME FROM": [("t", "extra")]})
    with pytest.raises(EngineError) as caught:
        await connector.discover_tables([], ["t"])
    assert "where 1 are expected (TABLE_NAME)" in caught.value.text()


def test_a_result_of_another_width_is_a_query_failure_naming_the_columns() -> None:
    names = ("id", "email")
    with pytest.raises(EngineError) as caught:
        transposed([(1,), (2,)], names, DS)
    assert caught.value.text() == (
        f"{QUERY}: the source answered rows of 1 value(s) where 2 columns are selected (id, email)"
    )
    with pytest.raises(EngineError) as ragged:
        transposed([(1, "a"), (2,)], names, DS)
    assert "rows of 1/2 value(s)" in ragged.value.text()
    assert transposed([(1, "a")], names, DS) == [(1,), ("a",)]
    with pytest.raises(EngineError) as described:
        result_columns([object()], names, DS, "public.accounts")
    assert described.value.text() == (
        f"{QUERY}: table 'public.accounts' answered 1 result column(s) where 2 are selected "
        "(id, email)"
    )


def test_mysql_batch_of_one_column_where_two_are_selected_is_a_query_failure() -> None:
    with pytest.raises(EngineError) as caught:
        mysql._columns([(1,)], ("id", "email"), [], DS)
    assert caught.value.text().startswith(f"{QUERY}: the source answered rows of 1 value(s)")


def test_postgres_batch_of_one_column_where_two_are_selected_is_a_query_failure() -> None:
    with pytest.raises(EngineError) as caught:
        postgres._columns([(1,)], [], ("id", "email"), DS)
    assert caught.value.text().startswith(f"{QUERY}: the source answered rows of 1 value(s)")
