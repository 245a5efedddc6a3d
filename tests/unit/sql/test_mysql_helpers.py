"""Pure pieces of the MySQL connector: families, value text, TLS contexts, SQL, errors."""

from __future__ import annotations

import glob
import ssl
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from uuid import UUID

import pytest
from asyncmy import errors as mysql_errors
from asyncmy.constants import CLIENT
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fetcher.adapters.sql._common import Phase
from fetcher.adapters.sql.mysql import (
    MysqlConnector,
    build_tls_context,
    datetime_text,
    json_checked_column,
    map_mysql_errors,
    mysql_family,
    select_sql,
    time_text,
    tls_active,
)
from fetcher.engine import ConnectionDescriptor, EngineError, ErrorCategory
from fetcher.engine.filters.ast import BoundCondition, BoundFieldFilter, Operator
from fetcher.engine.model import TlsSettings
from fetcher.engine.ports import TableQuery
from fetcher.engine.types import Column, EngineType, TableSchema, TypeFamily


@pytest.mark.parametrize(
    ("data_type", "family"),
    [
        ("tinyint", TypeFamily.INTEGER),
        ("YEAR", TypeFamily.INTEGER),
        ("bigint", TypeFamily.INTEGER),
        ("decimal", TypeFamily.DECIMAL),
        ("float", TypeFamily.FLOAT),
        ("double", TypeFamily.FLOAT),
        ("enum", TypeFamily.TEXT),
        ("set", TypeFamily.TEXT),
        ("longtext", TypeFamily.TEXT),
        ("date", TypeFamily.DATE),
        ("datetime", TypeFamily.TIMESTAMP),
        ("timestamp", TypeFamily.TIMESTAMPTZ),
        ("time", TypeFamily.TIME),
        ("json", TypeFamily.JSON),
        ("bit", TypeFamily.BYTES),
        ("varbinary", TypeFamily.BYTES),
        ("mediumblob", TypeFamily.BYTES),
        ("geometry", TypeFamily.OTHER),
        ("uuid", TypeFamily.OTHER),
        ("inet6", TypeFamily.OTHER),
    ],
)
def test_families(data_type: str, family: TypeFamily) -> None:
    assert mysql_family(data_type) is family


def test_a_json_checked_longtext_is_json() -> None:
    assert mysql_family("longtext", json_checked=True) is TypeFamily.JSON


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2024-01-02 03:04:05", "2024-01-02T03:04:05Z"),
        ("2024-01-02 03:04:05.000000", "2024-01-02T03:04:05Z"),
        ("2024-01-02 03:04:05.120000", "2024-01-02T03:04:05.12Z"),
        ("2024-01-02 03:04:05.000001", "2024-01-02T03:04:05.000001Z"),
        ("0001-01-01 00:00:00", "0001-01-01T00:00:00Z"),
        ("0000-00-00 00:00:00", "0000-00-00 00:00:00"),
        ("0000-00-00 00:00:00.000000", "0000-00-00 00:00:00"),
        ("2024-00-15 10:00:00.500000", "2024-00-15 10:00:00.5"),
        ("2024-03-00 10:00:00", "2024-03-00 10:00:00"),
    ],
)
def test_datetime_text(text: str, want: str) -> None:
    assert datetime_text(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("12:00:00", "12:00:00"),
        ("12:00:00.000000", "12:00:00"),
        ("-838:59:59.000000", "-838:59:59"),
        ("100:00:00.500000", "100:00:00.5"),
        ("-00:00:01.000010", "-00:00:01.00001"),
    ],
)
def test_time_text(text: str, want: str) -> None:
    assert time_text(text) == want


@pytest.mark.parametrize(
    ("clause", "column"),
    [
        ("json_valid(`doc`)", "doc"),
        ("JSON_VALID(`a``b`)", "a`b"),
        (" json_valid(`x y`) ", "x y"),
        ("json_valid(`a`) and `b` > 0", None),
        ("`a` > 0", None),
    ],
)
def test_json_checked_column(clause: str, column: str | None) -> None:
    assert json_checked_column(clause) == column


# --------------------------------------------------------------------------------------------
# TLS
# --------------------------------------------------------------------------------------------


def _self_signed(name: str) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return pem, key_pem


@pytest.mark.parametrize("tls", [None, TlsSettings(mode=""), TlsSettings(mode="false")])
def test_tls_off(tls: TlsSettings | None) -> None:
    assert build_tls_context(tls, "db.example.com") is None


def test_tls_true_verifies_against_the_given_ca_and_checks_the_hostname() -> None:
    ca, _key = _self_signed("Test CA")
    context = build_tls_context(TlsSettings(mode="true", ca=ca), "db.example.com")
    assert context is not None
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "Test CA"),),)]


def test_tls_true_without_a_ca_uses_the_system_store() -> None:
    context = build_tls_context(TlsSettings(mode="true"), "db.example.com")
    assert context is not None
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname


@pytest.mark.parametrize("mode", ["skip-verify", "preferred"])
def test_unverified_modes(mode: str) -> None:
    context = build_tls_context(TlsSettings(mode=mode), "db.example.com")
    assert context is not None
    assert context.verify_mode is ssl.CERT_NONE
    assert not context.check_hostname


def test_client_certificate_is_loaded_through_files_that_are_removed() -> None:
    cert, key = _self_signed("client")
    before = set(glob.glob("/dev/shm/fetcher-*.pem")) | set(glob.glob("/tmp/fetcher-*.pem"))  # noqa: S108
    context = build_tls_context(TlsSettings(mode="skip-verify", cert=cert, key=key), "db")
    assert context is not None
    after = set(glob.glob("/dev/shm/fetcher-*.pem")) | set(glob.glob("/tmp/fetcher-*.pem"))  # noqa: S108
    assert after <= before


def test_a_key_that_does_not_match_is_refused() -> None:
    cert, _key = _self_signed("client")
    _other_cert, other_key = _self_signed("other")
    with pytest.raises(ssl.SSLError):
        build_tls_context(TlsSettings(mode="skip-verify", cert=cert, key=other_key), "db")


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match=r"ssl\.mode"):
        build_tls_context(TlsSettings(mode="require"), "db")


def test_sni_and_hostname_check_use_the_name_when_the_pinned_ip_is_dialled() -> None:
    """The driver passes the dialled host (the pinned IP) as ``server_hostname``; the context
    presents the connection's name instead (§2.9.1 rule 3)."""
    context = build_tls_context(TlsSettings(mode="true"), "db.example.com")
    assert context is not None
    tls = context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="203.0.113.7")
    assert tls.server_hostname == "db.example.com"


class _Transport:
    def __init__(self, ssl_object: object) -> None:
        self._ssl_object = ssl_object

    def get_extra_info(self, name: str) -> object:
        return self._ssl_object if name == "ssl_object" else None


@pytest.mark.parametrize(
    ("capabilities", "ssl_object", "active"),
    [
        (CLIENT.SSL, object(), True),
        (0, object(), False),  # the capability flag was stripped
        (CLIENT.SSL, None, False),  # plaintext socket
        (0, None, False),
    ],
)
def test_tls_active(capabilities: int, ssl_object: object, active: bool) -> None:
    conn = SimpleNamespace(server_capabilities=capabilities, _transport=_Transport(ssl_object))
    assert tls_active(conn) is active


def test_tls_not_active_without_a_transport() -> None:
    assert not tls_active(SimpleNamespace(server_capabilities=CLIENT.SSL, _transport=None))


# --------------------------------------------------------------------------------------------
# SQL and parameters
# --------------------------------------------------------------------------------------------


def test_select_quotes_with_backticks_and_binds_everything() -> None:
    table = TableSchema("shop", "we`ird%s", (Column("a`b", TypeFamily.TEXT),))
    at = Column("at", TypeFamily.TIMESTAMPTZ)
    tag = Column("tag", TypeFamily.TEXT)
    filters = (
        BoundFieldFilter(table.columns[0], (BoundCondition(Operator.LIKE, ("50\\%",)),)),
        BoundFieldFilter(
            at,
            (
                BoundCondition(
                    Operator.GT, (datetime(2024, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))),)
                ),
            ),
        ),
        BoundFieldFilter(tag, (BoundCondition(Operator.EQ, (UUID(int=1), None)),)),
    )
    sql, params = select_sql(TableQuery(table, table.columns, filters))
    assert sql == (
        "SELECT `a``b` FROM `shop`.`we``ird%%s` WHERE `a``b` LIKE %s ESCAPE '\\\\' AND "
        "`at` > %s AND (`tag` = %s OR `tag` IS NULL)"
    )
    assert params == ("50\\%", datetime(2024, 1, 1, 0, 0), "00000000-0000-0000-0000-000000000001")


def test_select_without_filters_still_has_a_parameter_tuple() -> None:
    """asyncmy applies ``%`` formatting only when parameters are given: ``()`` undoubles
    ``%%`` in identifiers."""
    table = TableSchema("d", "t%", (Column("c", TypeFamily.TEXT),))
    sql, params = select_sql(TableQuery(table, table.columns))
    assert (sql, params) == ("SELECT `c` FROM `d`.`t%%`", ())
    assert sql % params == "SELECT `c` FROM `d`.`t%`"


# --------------------------------------------------------------------------------------------
# Errors and connect arguments
# --------------------------------------------------------------------------------------------


def test_driver_errors_become_engine_errors() -> None:
    with pytest.raises(EngineError) as caught, map_mysql_errors(Phase.CONNECT, "maria"):
        raise mysql_errors.OperationalError(1045, "Access denied for user 'r'@'h'")
    assert caught.value.category is ErrorCategory.CONNECT
    assert caught.value.message == "failed to connect to datasource 'maria'"
    assert "Access denied" in str(caught.value.detail)
    with pytest.raises(EngineError) as caught, map_mysql_errors(Phase.QUERY, "maria"):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.message == "failed to query datasource 'maria'"


def _descriptor() -> ConnectionDescriptor:
    return ConnectionDescriptor(
        config_name="maria",
        type=EngineType.MYSQL,
        host="db.example.com",
        database="ledger",
        username="reader",
        password="s3cret",
    )


def test_connect_arguments_are_keywords_with_the_pinned_address_and_no_local_infile() -> None:
    connector = MysqlConnector(_descriptor(), pinned_address="203.0.113.7")
    kwargs = connector._connect_kwargs()
    assert kwargs["host"] == "203.0.113.7"
    assert kwargs["port"] == 3306
    assert kwargs["database"] == "ledger"
    assert kwargs["local_infile"] is False
    assert kwargs["connect_timeout"] == 10
    assert MysqlConnector(_descriptor())._connect_kwargs()["host"] == "db.example.com"


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        MysqlConnector(_descriptor(), batch_size=0)
