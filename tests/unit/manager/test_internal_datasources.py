"""§9.4 ``DATASOURCE_<NAME>_*`` parsing."""

from __future__ import annotations

import logging

import pytest

from fetcher.engine.types import EngineType
from fetcher.services.connections.internal_datasources import (
    internal_connection_id,
    parse_internal_datasources,
)


def pg_env(name: str = "LEDGER", **extra: str) -> dict[str, str]:
    env = {
        f"DATASOURCE_{name}_CONFIG_NAME": "ledger_ro",
        f"DATASOURCE_{name}_TYPE": "PostgreSQL",
        f"DATASOURCE_{name}_HOST": "db.internal.example",
        f"DATASOURCE_{name}_DATABASE": "ledger",
        f"DATASOURCE_{name}_USER": "ro",
        f"DATASOURCE_{name}_PASSWORD": " secret ",
    }
    env.update({f"DATASOURCE_{name}_{k}": v for k, v in extra.items()})
    return env


def test_parses_a_definition() -> None:
    result = parse_internal_datasources(pg_env(SCHEMA="acc", OPTIONS="a=1&b=x%20y"), embedded=False)
    d = result["ledger_ro"]
    assert d.type is EngineType.POSTGRESQL
    assert (d.host, d.port, d.database, d.username, d.schema) == (
        "db.internal.example", 5432, "ledger", "ro", "acc",
    )  # fmt: skip
    assert d.password == " secret "
    assert d.internal is True
    assert d.connection_id == internal_connection_id("ledger_ro")
    assert dict(d.metadata) == {"a": "1", "b": "x y"}


def test_id_is_the_uuid5_of_the_name() -> None:
    env = pg_env()
    env["DATASOURCE_LEDGER_CONFIG_NAME"] = "midaz_onboarding"
    d = parse_internal_datasources(env, embedded=False)["midaz_onboarding"]
    assert d.connection_id == "d23dda0c-5f1a-5d94-a584-ea056a9fa8c1"


def test_longest_suffix_and_names_with_underscores() -> None:
    env = pg_env("MY_SSL", SSL_KEY="-----BEGIN K", SSL_CERT="-----BEGIN C", SSLMODE="require")
    d = parse_internal_datasources(env, embedded=False)["ledger_ro"]
    assert d.ssl is not None
    assert (d.ssl.mode, d.ssl.cert, d.ssl.key) == ("require", "-----BEGIN C", "-----BEGIN K")


def test_names_without_config_name_are_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    env = {**pg_env(), "DATASOURCE_ORPHAN_HOST": "x", "DATASOURCE_ORPHAN_PASSWORD": "pw"}
    assert list(parse_internal_datasources(env, embedded=False)) == ["ledger_ro"]
    assert any("ORPHAN" in r.getMessage() for r in caplog.records)
    assert all("pw" not in r.getMessage().split() for r in caplog.records)


def test_default_ports_per_type() -> None:
    for kind, port, extra in (
        ("mysql", 3306, {}),
        ("sql_server", 1433, {}),
        ("oracle", 1521, {"OPTIONS": "serviceName=XEPDB1"}),
        ("mongodb", 27017, {"OPTIONS": "authSource=admin"}),
    ):
        env = pg_env(**extra)
        env["DATASOURCE_LEDGER_TYPE"] = kind
        assert parse_internal_datasources(env, embedded=False)["ledger_ro"].port == port


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"CONFIG_NAME": "ab"}, "CONFIG_NAME"),
        ({"TYPE": "db2"}, "TYPE"),
        ({"TYPE": "sqlite"}, "embedded"),
        ({"HOST": ""}, "HOST is required"),
        ({"HOST": "bad host"}, "HOST"),
        ({"PORT": "0"}, "PORT"),
        ({"PORT": "x"}, "PORT"),
        ({"DATABASE": "a;b"}, "DATABASE"),
        ({"USER": ""}, "USER is required"),
        ({"PASSWORD": ""}, "PASSWORD is required"),
        ({"SSLMODE": "true"}, "SSLMODE"),
        ({"SSL_CERT": "-----BEGIN C"}, "together"),
        ({"OPTIONS": "serviceName=bad name"}, "serviceName"),
        ({"OPTIONS": "novalue"}, "OPTIONS"),
    ],
)
def test_violations_refuse(extra: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=r"^invalid internal datasource LEDGER: ") as caught:
        parse_internal_datasources(pg_env(**extra), embedded=False)
    assert problem in str(caught.value)
    assert "secret" not in str(caught.value)


def test_oracle_requires_a_service_name() -> None:
    env = pg_env(TYPE="oracle")
    with pytest.raises(ValueError, match="serviceName"):
        parse_internal_datasources(env, embedded=False)


def test_duplicate_config_names_refuse() -> None:
    env = {**pg_env("A"), **pg_env("B")}
    with pytest.raises(ValueError, match="invalid internal datasource B: "):
        parse_internal_datasources(env, embedded=False)


def test_sqlite_in_embedded_mode(tmp_path: object) -> None:
    env = {
        "DATASOURCE_LITE_CONFIG_NAME": "lite",
        "DATASOURCE_LITE_TYPE": "sqlite",
        "DATASOURCE_LITE_DATABASE": "/data/x.db",
    }
    d = parse_internal_datasources(env, embedded=True)["lite"]
    assert (d.type, d.database, d.host) == (EngineType.SQLITE, "/data/x.db", None)
    with pytest.raises(ValueError, match="metadata store"):
        parse_internal_datasources(env, embedded=True, metadata_store_path="/data/x.db")
    with pytest.raises(ValueError, match="HOST"):
        parse_internal_datasources({**env, "DATASOURCE_LITE_HOST": "h"}, embedded=True)
