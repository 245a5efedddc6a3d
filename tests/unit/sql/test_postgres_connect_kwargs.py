"""§13 "Client certificates" and §2.9.1 keyword arguments: the libpq parameters of a connect."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from fetcher.adapters.sql.postgres import connect_kwargs, tls_files
from fetcher.engine.model import ConnectionDescriptor, TlsSettings
from fetcher.engine.types import EngineType


def _descriptor(ssl: TlsSettings | None) -> ConnectionDescriptor:
    return ConnectionDescriptor(
        config_name="pg",
        type=EngineType.POSTGRESQL,
        host="db.example.com",
        port=6543,
        database="ledger",
        username="reader",
        password="pw-sentinel",
        ssl=ssl,
    )


def _libpq(kwargs: dict[str, object]) -> dict[str, str]:
    """The conninfo psycopg hands libpq for these keyword arguments (``None`` dropped)."""
    return {k: str(v) for k, v in conninfo_to_dict(make_conninfo("", **kwargs)).items()}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "ssl",
    [
        None,
        TlsSettings(mode=""),
        TlsSettings(mode="disable"),
        TlsSettings(mode="require"),
        TlsSettings(mode="verify-full", ca="-----BEGIN CERTIFICATE-----\nCA\n"),
    ],
)
def test_without_a_client_certificate_libpq_offers_none(ssl: TlsSettings | None) -> None:
    with tls_files(ssl) as files:
        params = _libpq(connect_kwargs(_descriptor(ssl), None, files))
    assert params["sslcertmode"] == "disable"
    assert "sslcert" not in params
    assert "sslkey" not in params


def test_with_a_client_certificate_it_is_offered() -> None:
    ssl = TlsSettings(mode="verify-full", cert="CERT-PEM", key="KEY-PEM")
    with tls_files(ssl) as files:
        params = _libpq(connect_kwargs(_descriptor(ssl), None, files))
        assert params["sslcert"] == files["sslcert"]
        assert params["sslkey"] == files["sslkey"]
    assert "sslcertmode" not in params  # libpq's default, "allow": the given cert is sent


def test_parameters_are_separate_keywords() -> None:
    ssl = TlsSettings(mode="require")
    kwargs = connect_kwargs(_descriptor(ssl), "203.0.113.9", {})
    assert kwargs["host"] == "db.example.com"
    assert kwargs["hostaddr"] == "203.0.113.9"
    assert kwargs["port"] == 6543
    assert kwargs["dbname"] == "ledger"
    assert kwargs["user"] == "reader"
    assert kwargs["password"] == "pw-sentinel"
    assert kwargs["sslmode"] == "require"


def test_the_bundled_libpq_knows_sslcertmode() -> None:
    # sslcertmode arrived in libpq 16; an older libpq would refuse every connect.
    assert psycopg.pq.version() >= 160000
