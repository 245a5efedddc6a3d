"""PostgreSQL connector pieces that need no server: TLS files, intervals, families, errors."""

from __future__ import annotations

import os
import stat

import pytest

from fetcher.adapters.sql._common import (
    Phase,
    postgres_schema_excluded,
    postgres_table_excluded,
    sqlite_name_excluded,
    translate_errors,
)
from fetcher.adapters.sql.postgres import (
    parse_iso_interval,
    postgres_family,
    tls_files,
)
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.model import TlsSettings
from fetcher.engine.types import TypeFamily


def test_tls_files_are_private_and_removed() -> None:
    tls = TlsSettings(mode="verify-full", ca="CA-PEM", cert="CERT-PEM", key="KEY-PEM")
    with tls_files(tls) as params:
        assert set(params) == {"sslrootcert", "sslcert", "sslkey"}
        for name, pem in (
            ("sslrootcert", "CA-PEM"),
            ("sslcert", "CERT-PEM"),
            ("sslkey", "KEY-PEM"),
        ):
            path = params[name]
            if os.path.isdir("/dev/shm"):  # noqa: S108 - the tmpfs the contract asks for
                assert path.startswith("/dev/shm/")  # noqa: S108
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
            with open(path, encoding="utf-8") as handle:
                assert handle.read() == pem
        paths = list(params.values())
    assert not any(os.path.exists(p) for p in paths)


def test_tls_files_are_removed_on_error() -> None:
    tls = TlsSettings(mode="require", key="KEY-PEM")
    seen: list[str] = []

    def connect_fails() -> None:
        with tls_files(tls) as params:
            seen.append(params["sslkey"])
            raise RuntimeError("connect failed")

    with pytest.raises(RuntimeError):
        connect_fails()
    assert seen
    assert not os.path.exists(seen[0])


@pytest.mark.parametrize("tls", [None, TlsSettings(mode=""), TlsSettings(mode="disable", key="K")])
def test_no_tls_files_when_tls_is_off(tls: TlsSettings | None) -> None:
    with tls_files(tls) as params:
        assert params == {}


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("PT0S", (0, 0, 0)),
        ("P1Y2M3DT4H5M6.5S", (14, 3, 14_706_500_000)),
        ("P-1D", (0, -1, 0)),
        ("P11M", (11, 0, 0)),
        ("P-1DT-2H-3.5S", (0, -1, -7_203_500_000)),
        ("PT-0.5S", (0, 0, -500_000)),
        ("P-1Y-2D", (-12, -2, 0)),
        ("garbage", None),
    ],
)
def test_parse_iso_interval(text: str, parts: tuple[int, int, int] | None) -> None:
    assert parse_iso_interval(text) == parts


@pytest.mark.parametrize(
    ("data_type", "udt", "family", "native"),
    [
        ("integer", "int4", TypeFamily.INTEGER, "integer"),
        ("bigint", "int8", TypeFamily.INTEGER, "bigint"),
        ("numeric", "numeric", TypeFamily.DECIMAL, "numeric"),
        ("money", "money", TypeFamily.DECIMAL, "money"),
        ("real", "float4", TypeFamily.FLOAT, "real"),
        ("double precision", "float8", TypeFamily.FLOAT, "double precision"),
        ("boolean", "bool", TypeFamily.BOOLEAN, "boolean"),
        ("character varying", "varchar", TypeFamily.TEXT, "character varying"),
        ("USER-DEFINED", "citext", TypeFamily.TEXT, "citext"),
        ("date", "date", TypeFamily.DATE, "date"),
        (
            "timestamp without time zone",
            "timestamp",
            TypeFamily.TIMESTAMP,
            "timestamp without time zone",
        ),
        (
            "timestamp with time zone",
            "timestamptz",
            TypeFamily.TIMESTAMPTZ,
            "timestamp with time zone",
        ),
        ("time with time zone", "timetz", TypeFamily.TIME, "time with time zone"),
        ("uuid", "uuid", TypeFamily.UUID, "uuid"),
        ("jsonb", "jsonb", TypeFamily.JSON, "jsonb"),
        ("bytea", "bytea", TypeFamily.BYTES, "bytea"),
        ("ARRAY", "_int4", TypeFamily.ARRAY, "_int4"),
        ("interval", "interval", TypeFamily.OTHER, "interval"),
        ("inet", "inet", TypeFamily.OTHER, "inet"),
        ("USER-DEFINED", "geometry", TypeFamily.OTHER, "geometry"),
    ],
)
def test_postgres_family(data_type: str, udt: str, family: TypeFamily, native: str) -> None:
    column = postgres_family(data_type, udt)
    assert (column.family, column.native_type) == (family, native)


def test_enum_is_text() -> None:
    assert postgres_family("USER-DEFINED", "mood", is_enum=True).family is TypeFamily.TEXT


def test_exclusions() -> None:
    assert postgres_schema_excluded("pg_catalog")
    assert postgres_schema_excluded("information_schema")
    assert postgres_schema_excluded("pg_toast_temp_1")
    assert not postgres_schema_excluded("public")
    assert postgres_table_excluded("pg_stat")
    assert not postgres_table_excluded("pgx")
    assert sqlite_name_excluded("sqlite_sequence")
    assert sqlite_name_excluded("SQLITE_stat1")
    assert not sqlite_name_excluded("sqlitex")


@pytest.mark.parametrize(
    ("phase", "category", "message"),
    [
        (Phase.CONNECT, ErrorCategory.CONNECT, "failed to connect to datasource 'ds'"),
        (Phase.DISCOVER, ErrorCategory.UNAVAILABLE, "failed to discover datasource schema 'ds'"),
        (Phase.QUERY, ErrorCategory.UNAVAILABLE, "failed to query datasource 'ds'"),
    ],
)
def test_translate_errors(phase: Phase, category: ErrorCategory, message: str) -> None:
    with pytest.raises(EngineError) as caught, translate_errors(phase, "ds", (KeyError,)):
        raise ConnectionRefusedError("refused")
    assert (caught.value.category, caught.value.message) == (category, message)
    assert caught.value.detail == "refused"
    with pytest.raises(EngineError) as timed_out, translate_errors(phase, "ds", ()):
        raise TimeoutError
    assert timed_out.value.detail == "timed out"
    with pytest.raises(ValueError, match="bug"), translate_errors(phase, "ds", (KeyError,)):
        raise ValueError("bug")
