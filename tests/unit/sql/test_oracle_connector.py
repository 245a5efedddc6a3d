"""The Oracle connector without a server (none can run here): every statement it renders parses
as Oracle SQL, the connect arguments and TLS contexts per §11.2 mode, §11.4 families, §5.3
encodings of the driver's Python values, and error translation with redacted details."""

from __future__ import annotations

import datetime as dt
import os
import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from types import SimpleNamespace

import oracledb
import pytest
import sqlglot
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fetcher.adapters.secret_files import pem_files
from fetcher.adapters.sql import oracle
from fetcher.adapters.sql._common import Phase, oracle_owner_excluded, oracle_table_excluded
from fetcher.adapters.sql.oracle import (
    FIXED_STATEMENTS,
    OracleConnector,
    catalog_sql,
    column_converter,
    connect_kwargs,
    map_oracle_errors,
    oracle_family,
    select_sql,
    tables_from,
    tls_context,
)
from fetcher.crypto.redact import Redactor
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import BoundCondition, BoundFieldFilter, Operator
from fetcher.engine.model import ConnectionDescriptor, TlsSettings
from fetcher.engine.ports import TableQuery
from fetcher.engine.types import Column, EngineType, TableSchema, TypeFamily
from fetcher.engine.values import ExactNumber

PASSWORD = "s3cret-Pass;word"


def descriptor(**overrides: object) -> ConnectionDescriptor:
    values: dict[str, object] = {
        "config_name": "ora",
        "type": EngineType.ORACLE,
        "host": "db.example.com",
        "port": 1522,
        "database": "label",
        "username": "reader",
        "password": PASSWORD,
        "metadata": {"serviceName": "FREEPDB1"},
    }
    values.update(overrides)
    return ConnectionDescriptor(**values)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# SQL: every rendered statement parses as Oracle SQL
# --------------------------------------------------------------------------------------------

_NUMBERED = re.compile(r":(\d+)")


def parse_oracle(sql: str, params: int) -> sqlglot.exp.Expr:
    """Parse ``sql`` as Oracle after checking its binds are exactly ``:1`` … ``:params`` in
    order. sqlglot 30 cannot parse numbered binds, so they are renamed ``:p1`` … first."""
    assert [int(n) for n in _NUMBERED.findall(sql)] == list(range(1, params + 1))
    return sqlglot.parse_one(_NUMBERED.sub(r":p\1", sql), read="oracle")


NUM = Column("AMOUNT", TypeFamily.DECIMAL, "NUMBER")
NAME = Column("NAME", TypeFamily.TEXT, "VARCHAR2")
TSTZ = Column("SEEN", TypeFamily.TIMESTAMPTZ, "TIMESTAMP(6) WITH TIME ZONE")
ODD = Column('we"ird; DROP', TypeFamily.TEXT, "VARCHAR2")


def every_operator() -> tuple[BoundFieldFilter, ...]:
    """One condition of every operator and null form (§3.4)."""
    c = BoundCondition
    return (
        BoundFieldFilter(
            NUM,
            (
                c(Operator.EQ, (Decimal("1"),)),
                c(Operator.EQ, (Decimal("1"), Decimal("2"), None)),
                c(Operator.NE, (Decimal("3"), None)),
                c(Operator.GT, (Decimal("0"),)),
                c(Operator.GTE, (Decimal("0"),)),
                c(Operator.LT, (Decimal("9"),)),
                c(Operator.LTE, (Decimal("9"),)),
                c(Operator.BETWEEN, (Decimal("1"), Decimal("5"))),
                c(Operator.IN, (Decimal("1"), None)),
                c(Operator.NIN, (Decimal("7"), None)),
                c(Operator.EQ, (None,)),
            ),
        ),
        BoundFieldFilter(NAME, (c(Operator.LIKE, ("a\\%b_%",)),)),
        BoundFieldFilter(
            TSTZ,
            (
                c(
                    Operator.BETWEEN,
                    (
                        dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                        dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
                    ),
                    upper_exclusive=True,
                ),
            ),
        ),
        BoundFieldFilter(ODD, (c(Operator.NE, ("x' OR '1'='1",)),)),
    )


def query(columns: tuple[Column, ...], filters: tuple[BoundFieldFilter, ...] = ()) -> TableQuery:
    table = TableSchema("HR", "EMP", (NUM, NAME, TSTZ, ODD))
    return TableQuery(table, columns, filters)


def test_fixed_statements_parse() -> None:
    for sql in FIXED_STATEMENTS:
        assert parse_oracle(sql, 0) is not None


@pytest.mark.parametrize("owners", [1, 2, 20])
def test_catalog_query_parses_and_binds_each_owner(owners: int) -> None:
    sql = catalog_sql(owners)
    tree = parse_oracle(sql, owners)
    tables = {t.name.upper() for t in tree.find_all(sqlglot.exp.Table)}
    assert {"ALL_TAB_COLUMNS", "ALL_TABLES", "ALL_VIEWS"} <= tables
    with pytest.raises(ValueError, match="at least one owner"):
        catalog_sql(0)


def test_select_with_every_operator_parses() -> None:
    sql, params = select_sql(query((NUM, NAME, ODD), every_operator()))
    parse_oracle(sql, len(params))
    assert sql.startswith('SELECT "AMOUNT", "NAME", "we""ird; DROP" FROM "HR"."EMP" WHERE ')
    assert '"NAME" LIKE :' in sql
    assert "ESCAPE '\\'" in sql
    assert "x' OR '1'='1" in params  # values are bound, never in the text
    assert "OR '1'" not in sql


def test_zoned_timestamps_are_read_in_utc_under_their_name() -> None:
    sql, params = select_sql(query((NUM, TSTZ), every_operator()))
    tree = parse_oracle(sql, len(params))
    assert sql.startswith('SELECT "AMOUNT", SYS_EXTRACT_UTC("SEEN") AS "SEEN" FROM (SELECT ')
    # Aware bounds are bound as naive UTC: compared in the UTC session zone (§11.1).
    assert dt.datetime(2026, 1, 1) in params
    assert dt.datetime(2026, 1, 2) in params
    assert not any(isinstance(p, dt.datetime) and p.tzinfo for p in params)
    assert tree.sql(dialect="oracle").endswith('"FETCHER_ROWS"')
    local = Column("LT", TypeFamily.TIMESTAMPTZ, "TIMESTAMP(6) WITH LOCAL TIME ZONE")
    plain, _ = select_sql(query((local,)))
    assert plain == 'SELECT "LT" FROM "HR"."EMP"'  # arrives in the UTC session zone


# --------------------------------------------------------------------------------------------
# Connect arguments and TLS (§2.9.1, §11.2)
# --------------------------------------------------------------------------------------------


def test_connect_kwargs_are_keywords_never_a_dsn() -> None:
    kwargs = connect_kwargs(descriptor())
    assert "dsn" not in kwargs
    assert "params" not in kwargs
    assert kwargs["host"] == "db.example.com"
    assert kwargs["port"] == 1522
    assert kwargs["service_name"] == "FREEPDB1"
    assert (kwargs["user"], kwargs["password"]) == ("reader", PASSWORD)
    assert (kwargs["protocol"], kwargs["ssl_context"]) == ("tcp", None)
    assert kwargs["tcp_connect_timeout"] == 10.0
    assert kwargs["retry_count"] == 0
    assert connect_kwargs(descriptor(port=None))["port"] == 1521


def test_pinned_address_is_dialed() -> None:
    kwargs = connect_kwargs(descriptor(), pinned_address="203.0.113.7")
    assert kwargs["host"] == "203.0.113.7"


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({}, "metadata.serviceName is required"),
        ({"serviceName": "  "}, "metadata.serviceName is required"),
        ({"serviceName": 5}, "metadata.serviceName is required"),
        ({"serviceName": "svc)(HOST=evil"}, "invalid characters"),
    ],
)
def test_service_name_is_required_and_checked(metadata: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        connect_kwargs(descriptor(metadata=metadata))


def _cert_pair(common_name: str) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem.decode()


@pytest.mark.parametrize("mode", ["", "disable", "false"])
def test_tcp_modes(mode: str) -> None:
    assert tls_context(TlsSettings(mode), "db.example.com") is None
    assert tls_context(None, "db.example.com") is None
    assert connect_kwargs(descriptor(ssl=TlsSettings(mode)))["protocol"] == "tcp"


@pytest.mark.parametrize("mode", ["true", "enable"])
def test_chain_verified_without_name_match(mode: str) -> None:
    ca, _key = _cert_pair("Test CA")
    context = tls_context(TlsSettings(mode, ca=ca), "db.example.com")
    assert context is not None
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname is False
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "Test CA"),),)]
    kwargs = connect_kwargs(descriptor(ssl=TlsSettings(mode, ca=ca)))
    assert kwargs["protocol"] == "tcps"
    assert kwargs["ssl_server_dn_match"] is False


def test_verify_checks_the_connection_name_even_when_an_ip_is_dialed() -> None:
    ca, _key = _cert_pair("Test CA")
    kwargs = connect_kwargs(descriptor(ssl=TlsSettings("verify", ca=ca)), "203.0.113.7")
    context = kwargs["ssl_context"]
    assert kwargs["host"] == "203.0.113.7"
    assert context.verify_mode is ssl.CERT_REQUIRED
    context.check_hostname = False  # what python-oracledb does before wrapping
    tls = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname=None)
    assert tls.server_hostname == "db.example.com"
    assert context.check_hostname is True


def test_verify_without_ca_uses_the_system_store() -> None:
    context = tls_context(TlsSettings("verify"), "db.example.com")
    assert context is not None
    default = ssl.create_default_context()
    assert len(context.get_ca_certs()) == len(default.get_ca_certs())


@pytest.fixture
def written_pems(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of every temporary PEM file the Oracle module writes (§11.2)."""
    written: list[str] = []

    @contextmanager
    def recording(*pems: str) -> Iterator[list[str]]:
        with pem_files(*pems) as paths:
            written.extend(paths)
            assert all(os.stat(path).st_mode & 0o777 == 0o600 for path in paths)
            yield paths

    monkeypatch.setattr(oracle, "pem_files", recording)
    return written


def test_skip_verify_checks_nothing_and_loads_the_client_certificate(
    written_pems: list[str],
) -> None:
    cert, key = _cert_pair("client")
    context = tls_context(TlsSettings("skip-verify", cert=cert, key=key), "db.example.com")
    assert context is not None
    assert context.verify_mode is ssl.CERT_NONE
    assert context.check_hostname is False
    assert len(written_pems) == 2
    assert not any(os.path.exists(p) for p in written_pems)  # unlinked right after loading


def test_bad_client_key_fails_and_leaves_no_file(written_pems: list[str]) -> None:
    cert, _key = _cert_pair("client")
    _other_cert, other_key = _cert_pair("other")
    with pytest.raises(ssl.SSLError):
        tls_context(TlsSettings("true", cert=cert, key=other_key), "db.example.com")
    assert len(written_pems) == 2
    assert not any(os.path.exists(p) for p in written_pems)


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match=r"unsupported ssl\.mode"):
        tls_context(TlsSettings("require"), "db.example.com")


# --------------------------------------------------------------------------------------------
# Families (§11.4) and discovery rows (§11.3)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data_type", "scale", "family"),
    [
        ("NUMBER", 0, TypeFamily.INTEGER),
        ("NUMBER", 2, TypeFamily.DECIMAL),
        ("NUMBER", -2, TypeFamily.DECIMAL),
        ("NUMBER", None, TypeFamily.DECIMAL),
        ("FLOAT", None, TypeFamily.DECIMAL),
        ("BINARY_FLOAT", None, TypeFamily.FLOAT),
        ("BINARY_DOUBLE", None, TypeFamily.FLOAT),
        ("BOOLEAN", None, TypeFamily.BOOLEAN),
        ("VARCHAR2", None, TypeFamily.TEXT),
        ("NVARCHAR2", None, TypeFamily.TEXT),
        ("CHAR", None, TypeFamily.TEXT),
        ("NCHAR", None, TypeFamily.TEXT),
        ("CLOB", None, TypeFamily.TEXT),
        ("NCLOB", None, TypeFamily.TEXT),
        ("DATE", None, TypeFamily.TIMESTAMP),
        ("TIMESTAMP(6)", 6, TypeFamily.TIMESTAMP),
        ("TIMESTAMP(9) WITH TIME ZONE", 9, TypeFamily.TIMESTAMPTZ),
        ("TIMESTAMP(6) WITH LOCAL TIME ZONE", 6, TypeFamily.TIMESTAMPTZ),
        ("JSON", None, TypeFamily.JSON),
        ("BLOB", None, TypeFamily.BYTES),
        ("RAW", None, TypeFamily.BYTES),
        ("LONG RAW", None, TypeFamily.BYTES),
        ("INTERVAL DAY(2) TO SECOND(6)", 6, TypeFamily.OTHER),
        ("INTERVAL YEAR(2) TO MONTH", 0, TypeFamily.OTHER),
        ("ROWID", None, TypeFamily.OTHER),
        ("XMLTYPE", None, TypeFamily.OTHER),
    ],
)
def test_families(data_type: str, scale: int | None, family: TypeFamily) -> None:
    assert oracle_family(data_type, scale) is family


def test_system_owners_and_names_are_excluded() -> None:
    for owner in ("SYS", "SYSTEM", "XDB", "MDSYS", "APEX_230100", "APEX_PUBLIC_USER"):
        assert oracle_owner_excluded(owner)
    assert not oracle_owner_excluded("HR")
    for name in ("BIN$abc==$0", "LOGMNR_X", "REDO_DB", "MVIEW$_X", "AQ$_Q", "PLAN_TABLE"):
        assert oracle_table_excluded(name)
    for name in ("EMP", "SQLPLUS", "PLAN_TABLES"):
        assert not oracle_table_excluded(name)
    assert oracle_table_excluded("SQLPLUS_PRODUCT_PROFILE")


def test_tables_from_groups_and_excludes() -> None:
    rows = [
        ("HR", "EMP", "ID", "NUMBER", 0),
        ("HR", "EMP", "SALARY", "NUMBER", 2),
        ("HR", "EMP_V", "ID", "NUMBER", 0),
        ("HR", "PLAN_TABLE", "X", "VARCHAR2", None),
        ("HR", "DR$IDX", "X", "VARCHAR2", None),
        ("SYS", "DUAL", "DUMMY", "VARCHAR2", None),
    ]
    tables = tables_from(rows, "ds")
    assert [(t.schema, t.name) for t in tables] == [("HR", "EMP"), ("HR", "EMP_V")]
    assert tables[0].columns == (
        Column("ID", TypeFamily.INTEGER, "NUMBER"),
        Column("SALARY", TypeFamily.DECIMAL, "NUMBER"),
    )


def test_default_owner_marker_is_the_connected_user() -> None:
    connector = OracleConnector(descriptor())
    connector._user = "READER"
    assert connector.resolve_scope(["", "HR", "SYS", "APEX_X"]) == ["HR", "READER"]
    assert connector.resolve_scope(["SYSTEM"]) == []


# --------------------------------------------------------------------------------------------
# Values (§5.3), built as python-oracledb returns them
# --------------------------------------------------------------------------------------------


def convert(
    type_code: object, values: list[object], precision: int = 0, scale: int = 0
) -> list[object]:
    return list(column_converter(type_code, precision, scale)(values))


def test_numbers() -> None:
    number = oracledb.DB_TYPE_NUMBER
    assert convert(number, [Decimal("42"), 7, None], precision=10, scale=0) == [42, 7, None]
    assert convert(number, [Decimal(10) ** 30], precision=38, scale=0) == [10**30]
    assert convert(number, [Decimal("1500"), Decimal("-0.5")], precision=10, scale=2) == [
        "1500.00",
        "-0.50",
    ]
    assert convert(number, [Decimal("1E+3"), Decimal("0.000001"), 3], scale=-127) == [
        "1000",
        "0.000001",
        "3",
    ]
    # A view column discovered as integer (DATA_SCALE 0) whose fetched metadata lost the
    # precision still comes back as integers: the discovered family decides (§11.4).
    view_int = column_converter(number, 0, -127, TypeFamily.INTEGER)
    assert list(view_int([Decimal("5"), None])) == [5, None]
    assert list(column_converter(number, 10, 0, TypeFamily.DECIMAL)([Decimal("5")])) == ["5"]
    big = Decimal("1" * 36 + ".5")
    assert convert(number, [big], precision=38, scale=2) == ["1" * 36 + ".50"]


def test_floats() -> None:
    assert convert(oracledb.DB_TYPE_BINARY_FLOAT, [0.10000000149011612]) == [0.1]
    assert convert(oracledb.DB_TYPE_BINARY_DOUBLE, [float("nan"), float("-inf"), 0.1]) == [
        "NaN",
        "-Infinity",
        0.1,
    ]


def test_dates_and_timestamps_are_utc() -> None:
    value = dt.datetime(2026, 1, 2, 3, 4, 5, 120000)
    for code in (
        oracledb.DB_TYPE_DATE,
        oracledb.DB_TYPE_TIMESTAMP,
        oracledb.DB_TYPE_TIMESTAMP_LTZ,
        oracledb.DB_TYPE_TIMESTAMP_TZ,
    ):
        assert convert(code, [value]) == ["2026-01-02T03:04:05.12Z"]
    zoned = dt.datetime(2026, 1, 2, 3, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert convert(oracledb.DB_TYPE_TIMESTAMP_TZ, [zoned]) == ["2026-01-02T01:00:00Z"]


def test_intervals() -> None:
    ds = dt.timedelta(days=1, hours=2, microseconds=500000)
    assert convert(oracledb.DB_TYPE_INTERVAL_DS, [ds, -dt.timedelta(days=1)]) == [
        "P1DT2H0.5S",
        "-P1D",
    ]
    ym = oracledb.IntervalYM(1, 2)
    assert convert(oracledb.DB_TYPE_INTERVAL_YM, [ym, oracledb.IntervalYM(-1, -2)]) == [
        "P1Y2M",
        "-P1Y2M",
    ]


def test_bytes_text_boolean_json() -> None:
    assert convert(oracledb.DB_TYPE_RAW, [b"\x00\xff"]) == ["AP8="]
    assert convert(oracledb.DB_TYPE_BLOB, [b"abc"]) == ["YWJj"]
    assert convert(oracledb.DB_TYPE_NVARCHAR, ["a\ud800b", "ok"]) == ["a\ufffdb", "ok"]
    assert convert(oracledb.DB_TYPE_CLOB, ["long text"]) == ["long text"]
    assert convert(oracledb.DB_TYPE_BOOLEAN, [True, False]) == [True, False]
    [doc] = convert(
        oracledb.DB_TYPE_JSON,
        [{"a": [Decimal("1.50"), 2, None, True], "b": {"c": "x"}, "d": 0.5}],
    )
    assert isinstance(doc, dict)
    exact = doc["a"][0]
    assert isinstance(exact, ExactNumber)
    assert exact.text == "1.50"
    assert doc["a"][1:] == [2, None, True]
    assert doc["b"] == {"c": "x"}
    assert doc["d"] == 0.5


def test_other_types_fall_back_to_their_text() -> None:
    assert convert(oracledb.DB_TYPE_ROWID, ["AAAR3sAAEAAAACXAAA"]) == ["AAAR3sAAEAAAACXAAA"]
    assert convert(oracledb.DB_TYPE_XMLTYPE, ["<a/>"]) == ["<a/>"]


# --------------------------------------------------------------------------------------------
# Errors (§4.5, §8.7)
# --------------------------------------------------------------------------------------------


def _driver_error(message: str) -> oracledb.DatabaseError:
    return oracledb.DatabaseError(SimpleNamespace(message=message))


@pytest.mark.parametrize(
    ("phase", "category", "fixed"),
    [
        (Phase.CONNECT, ErrorCategory.CONNECT, "failed to connect to datasource 'ora'"),
        (Phase.DISCOVER, ErrorCategory.UNAVAILABLE, "failed to discover datasource schema 'ora'"),
        (Phase.QUERY, ErrorCategory.UNAVAILABLE, "failed to query datasource 'ora'"),
    ],
)
def test_driver_errors_map_by_phase(phase: Phase, category: ErrorCategory, fixed: str) -> None:
    text = (
        "ORA-01017: invalid credential or not authorized; logon denied\n"
        "Help: https://docs.oracle.com/error-help/db/ora-01017/"
    )
    with pytest.raises(EngineError) as caught, map_oracle_errors(phase, "ora"):
        raise _driver_error(text)
    assert caught.value.category is category
    assert caught.value.message == fixed
    assert caught.value.detail == "ORA-01017: invalid credential or not authorized; logon denied"


def test_sockets_timeouts_and_engine_errors() -> None:
    with pytest.raises(EngineError) as caught, map_oracle_errors(Phase.QUERY, "ora"):
        raise ConnectionResetError("reset by peer")
    assert caught.value.detail == "reset by peer"
    with pytest.raises(EngineError) as caught, map_oracle_errors(Phase.DISCOVER, "ora"):
        raise TimeoutError
    assert caught.value.detail == "timed out"
    original = EngineError(ErrorCategory.VALIDATION, "kept")
    with pytest.raises(EngineError) as caught, map_oracle_errors(Phase.QUERY, "ora"):
        raise original
    assert caught.value is original


async def test_closed_port_is_a_redacted_connect_failure(unused_tcp_port: int) -> None:
    connection = descriptor(host="127.0.0.1", port=unused_tcp_port)
    with pytest.raises(EngineError) as caught:
        async with OracleConnector(connection):
            pass
    error = caught.value
    assert error.category is ErrorCategory.CONNECT
    assert error.detail is not None
    assert error.detail.startswith("DPY-6005")
    assert "CONNECTION_ID" not in error.detail
    redacted = error.text(Redactor(secrets=[PASSWORD], hosts=["127.0.0.1"]))
    assert "127.0.0.1" not in redacted
    assert PASSWORD not in redacted
    assert redacted.startswith("failed to connect to datasource 'ora': DPY-6005")


async def test_missing_service_name_fails_the_connect_before_dialing() -> None:
    with pytest.raises(EngineError) as caught:
        async with OracleConnector(descriptor(metadata={}, host="192.0.2.1")):
            pass
    assert caught.value.category is ErrorCategory.CONNECT
    assert caught.value.detail == "metadata.serviceName is required"


async def test_unopened_connector_refuses_work_and_closes_twice() -> None:
    connector = OracleConnector(descriptor())
    with pytest.raises(EngineError) as caught:
        await connector.discover([""])
    assert caught.value.message == "failed to discover datasource schema 'ora'"
    await connector.__aexit__(None, None, None)
    await connector.__aexit__(None, None, None)
    with pytest.raises(ValueError, match="batch_size"):
        OracleConnector(descriptor(), batch_size=0)


class _RowsCursor:
    """An async cursor over ``rows`` that records ``arraysize`` at each ``fetchmany``."""

    def __init__(self, rows: list[tuple[object, ...]]) -> None:
        self.rows = rows
        self.arraysize = self.prefetchrows = 0
        self.fetches: list[tuple[int, int]] = []  # (size asked, arraysize then)
        self.description = [
            SimpleNamespace(type_code=oracledb.DB_TYPE_NUMBER, precision=10, scale=0),
            SimpleNamespace(type_code=oracledb.DB_TYPE_VARCHAR, precision=0, scale=0),
        ]

    async def execute(self, _sql: str, _params: object = None, **_options: object) -> None:
        pass

    async def fetchmany(self, size: int) -> list[tuple[object, ...]]:
        self.fetches.append((size, self.arraysize))
        taken, self.rows = self.rows[:size], self.rows[size:]
        return taken

    def close(self) -> None:
        pass


async def test_stream_fetches_are_sized_by_bytes_and_arraysize_follows() -> None:
    """``fetcher.adapters.batch_sizing``: a small first fetch, then about
    ``BATCH_TARGET_BYTES`` of rows; the driver's round trips (``arraysize``, and
    ``prefetchrows`` for the first) ask for no more."""
    from fetcher.adapters.batch_sizing import BATCH_TARGET_BYTES, FIRST_BATCH_ROWS

    width = 100_000
    cursor = _RowsCursor([(n, "w" * width) for n in range(100)])

    class Conn:
        async def rollback(self) -> None:
            pass

        def cursor(self) -> _RowsCursor:
            return cursor

    connector = OracleConnector(descriptor(), batch_size=2_000)
    connector._conn = Conn()  # type: ignore[assignment]
    ident = Column("ID", TypeFamily.INTEGER, "NUMBER")
    table = TableSchema("APP", "WIDE", (ident, NAME))
    query = TableQuery(table, (ident, NAME))
    rows = [row async for batch in connector.stream(query) for row in batch]
    assert [row["ID"] for row in rows] == list(range(100))
    assert cursor.prefetchrows == FIRST_BATCH_ROWS
    per_batch = BATCH_TARGET_BYTES // (width + 8)
    assert cursor.fetches[:3] == [
        (FIRST_BATCH_ROWS, FIRST_BATCH_ROWS),
        (per_batch, per_batch),
        (per_batch, per_batch),
    ]
