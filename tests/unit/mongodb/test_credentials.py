"""§2.5, §9.4: MONGODB ``userName`` and ``password`` are optional together."""

from __future__ import annotations

from typing import Any

import pytest

from fetcher.engine.types import EngineType
from fetcher.manager.errors import title_for
from fetcher.services.connections.internal_datasources import parse_internal_datasources
from fetcher.services.connections.validation import (
    ConnectionInput,
    validate_connection_create,
    validate_connection_patch,
)
from fetcher.services.errors import ApiError

SERVER: dict[str, Any] = {
    "embedded": False,
    "sqlite_allowed_dir": None,
    "metadata_store_path": None,
}


def _body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "configName": "mongo_main",
        "type": "MONGODB",
        "host": "mongo.example.com",
        "port": 27017,
        "databaseName": "ledger",
    }
    body.update(overrides)
    return body


def _fail(call: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    return caught.value


def test_mongodb_without_credentials_is_valid() -> None:
    conn = validate_connection_create(_body(), **SERVER)
    assert (conn.type, conn.user_name, conn.password) == ("MONGODB", None, None)


def test_mongodb_with_both_credentials_is_valid() -> None:
    conn = validate_connection_create(_body(userName=" app ", password=" s3 "), **SERVER)
    assert (conn.user_name, conn.password) == ("app", " s3 ")


@pytest.mark.parametrize(("sent", "missing"), [("userName", "password"), ("password", "userName")])
def test_mongodb_with_one_credential_misses_the_other(sent: str, missing: str) -> None:
    err = _fail(lambda: validate_connection_create(_body(**{sent: "x"}), **SERVER))
    assert (err.code, title_for(err)) == ("FET-0402", "Missing Fields in Request")
    assert err.fields == {missing: f"{missing} is a required field"}


def test_mongodb_blank_credentials_are_invalid_not_absent() -> None:
    err = _fail(lambda: validate_connection_create(_body(userName=" ", password="x"), **SERVER))
    assert err.code == "FET-0001"
    assert set(err.fields or {}) == {"userName"}


@pytest.mark.parametrize("kind", ["POSTGRESQL", "MYSQL", "SQL_SERVER"])
def test_other_types_still_require_both(kind: str) -> None:
    err = _fail(lambda: validate_connection_create(_body(type=kind, port=5432), **SERVER))
    assert err.code == "FET-0402"
    assert set(err.fields or {}) == {"userName", "password"}


STORED_WITH = ConnectionInput(
    config_name="mongo_main",
    type="MONGODB",
    database_name="ledger",
    host="mongo.example.com",
    port=27017,
    user_name="app",
)
STORED_WITHOUT = ConnectionInput(
    config_name="mongo_main",
    type="MONGODB",
    database_name="ledger",
    host="mongo.example.com",
    port=27017,
)


def _patch(stored: ConnectionInput, body: dict[str, Any]) -> ConnectionInput:
    return validate_connection_patch(stored, body, **SERVER)


def test_patch_removes_both_credentials_with_null() -> None:
    merged = _patch(STORED_WITH, {"userName": None, "password": None})
    assert (merged.user_name, merged.password) == (None, None)


def test_patch_removing_one_credential_misses_it() -> None:
    err = _fail(lambda: _patch(STORED_WITH, {"userName": None}))
    assert err.code == "FET-0402"
    assert err.fields == {"userName": "userName is a required field"}


def test_patch_adds_both_credentials() -> None:
    merged = _patch(STORED_WITHOUT, {"userName": "app", "password": "pw"})
    assert (merged.user_name, merged.password) == ("app", "pw")


def test_patch_adding_only_a_user_name_misses_the_password() -> None:
    err = _fail(lambda: _patch(STORED_WITHOUT, {"userName": "app"}))
    assert err.code == "FET-0402"
    assert err.fields == {"password": "password is a required field"}


def test_patch_other_fields_keep_a_credential_less_connection_valid() -> None:
    merged = _patch(STORED_WITHOUT, {"port": 27018})
    assert (merged.port, merged.user_name, merged.password) == (27018, None, None)


def test_patch_null_credentials_on_another_type_cannot_be_null() -> None:
    stored = ConnectionInput(
        config_name="pg_main",
        type="POSTGRESQL",
        database_name="d",
        host="h",
        port=5432,
        user_name="u",
    )
    err = _fail(lambda: _patch(stored, {"userName": None, "password": None}))
    assert err.code == "FET-0001"
    assert err.fields == {
        "userName": "userName cannot be null",
        "password": "password cannot be null",
    }


def test_patch_to_another_type_requires_credentials() -> None:
    err = _fail(lambda: _patch(STORED_WITHOUT, {"type": "POSTGRESQL", "port": 5432}))
    assert err.code == "FET-0402"
    assert set(err.fields or {}) == {"userName", "password"}


# --- §9.4 internal datasources ---------------------------------------------------------------


def _env(**values: str) -> dict[str, str]:
    base = {"CONFIG_NAME": "mongo_int", "TYPE": "mongodb", "HOST": "10.0.0.5", "DATABASE": "db"}
    base.update(values)
    return {f"DATASOURCE_MONGO_{k}": v for k, v in base.items()}


def test_internal_mongodb_without_credentials() -> None:
    parsed = parse_internal_datasources(_env(), embedded=False)
    descriptor = parsed["mongo_int"]
    assert descriptor.type is EngineType.MONGODB
    assert (descriptor.username, descriptor.password, descriptor.port) == (None, None, 27017)


def test_internal_mongodb_with_credentials_and_auth_source() -> None:
    env = _env(USER="app", PASSWORD="pw", OPTIONS="authSource=admin2")
    descriptor = parse_internal_datasources(env, embedded=False)["mongo_int"]
    assert (descriptor.username, descriptor.password) == ("app", "pw")
    assert descriptor.metadata == {"authSource": "admin2"}


@pytest.mark.parametrize(("given", "missing"), [("USER", "PASSWORD"), ("PASSWORD", "USER")])
def test_internal_mongodb_with_one_credential_is_refused(given: str, missing: str) -> None:
    with pytest.raises(ValueError, match=f"{missing} is required"):
        parse_internal_datasources(_env(**{given: "x"}), embedded=False)


def test_internal_postgres_still_requires_credentials() -> None:
    with pytest.raises(ValueError, match="USER is required"):
        parse_internal_datasources(_env(TYPE="postgresql"), embedded=False)
