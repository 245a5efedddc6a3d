"""§2.5 / §2.6.1 / §2.6.5 connection validation: order, codes, messages and every boundary."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from fetcher.manager.errors import title_for
from fetcher.services.api.shapes import SSL_MODES, is_valid_host
from fetcher.services.connections.sqlite_files import sqlite_location_ok
from fetcher.services.connections.validation import (
    SQLITE_LOCATION_MESSAGE,
    ConnectionInput,
    SslInput,
    validate_connection_create,
    validate_connection_patch,
)
from fetcher.services.errors import BAD_REQUEST_MESSAGE, MISSING_FIELDS_MESSAGE, ApiError

SERVER: dict[str, Any] = {
    "embedded": False,
    "sqlite_allowed_dir": None,
    "metadata_store_path": None,
}
PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"


def _body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "configName": "pg_main",
        "type": "POSTGRESQL",
        "host": "db.example.com",
        "port": 5432,
        "databaseName": "ledger",
        "userName": "reader",
        "password": "secret",
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not _ABSENT}


_ABSENT: Any = object()


def _create(body: dict[str, Any], **ctx: Any) -> ConnectionInput:
    return validate_connection_create(body, **{**SERVER, **ctx})


def _fail(body: dict[str, Any], **ctx: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        _create(body, **ctx)
    return caught.value


def _invalid(body: dict[str, Any], **ctx: Any) -> dict[str, str]:
    """The ``fields`` of an expected FET-0001 ``Bad Request``."""
    err = _fail(body, **ctx)
    assert (err.code, title_for(err), err.message) == (
        "FET-0001",
        "Bad Request",
        BAD_REQUEST_MESSAGE,
    )
    assert err.fields is not None
    return err.fields


# --- success and normalization --------------------------------------------------------------


def test_valid_create_is_trimmed_except_secrets() -> None:
    conn = _create(
        _body(
            configName=" pg_main ",
            host=" db.example.com ",
            databaseName=" ledger ",
            userName=" reader ",
            password="  pw  ",
            schema=" accounting ",
            ssl={"mode": " require ", "ca": PEM, "cert": PEM, "key": KEY},
            metadata={"team": " core "},
        )
    )
    assert conn.config_name == "pg_main"
    assert conn.host == "db.example.com"
    assert conn.database_name == "ledger"
    assert conn.user_name == "reader"
    assert conn.password == "  pw  "
    assert conn.schema == "accounting"
    assert conn.ssl == SslInput(mode="require", ca=PEM, cert=PEM, key=KEY)
    assert conn.metadata == {"team": " core "}


def test_repr_hides_secrets() -> None:
    conn = _create(_body(password="s3ntinel-pw", ssl={"mode": "require", "cert": PEM, "key": KEY}))
    assert "s3ntinel-pw" not in repr(conn)
    assert "PRIVATE KEY" not in repr(conn)


@pytest.mark.parametrize("kind", ["POSTGRESQL", "MYSQL", "SQL_SERVER", "MONGODB"])
def test_each_network_type_is_accepted(kind: str) -> None:
    assert _create(_body(type=kind)).type == kind


def test_oracle_with_service_name() -> None:
    conn = _create(_body(type="ORACLE", metadata={"serviceName": "ORCLPDB1"}))
    assert conn.metadata == {"serviceName": "ORCLPDB1"}


# --- step 3: unknown fields -----------------------------------------------------------------


def test_unknown_fields_including_product_name_and_ssl() -> None:
    err = _fail(_body(productName="p", ssl={"mode": "require", "foo": 1}, port="x"))
    assert err.code == "FET-0400"
    assert err.fields == {"productName": "unexpected field", "ssl.foo": "unexpected field"}


# --- step 4: required fields ----------------------------------------------------------------


@pytest.mark.parametrize(
    "field", ["configName", "type", "host", "port", "databaseName", "userName", "password"]
)
@pytest.mark.parametrize("value", [_ABSENT, None, "", "   "])
def test_each_required_field_absent_null_or_blank(field: str, value: Any) -> None:
    err = _fail(_body(**{field: value}))
    assert (err.code, title_for(err), err.message) == (
        "FET-0402",
        "Missing Fields in Request",
        MISSING_FIELDS_MESSAGE,
    )
    assert err.fields == {field: f"{field} is a required field"}


def test_only_missing_fields_are_listed_even_with_invalid_ones() -> None:
    err = _fail(_body(host=None, password=_ABSENT, port="5432", configName="x"))
    assert err.code == "FET-0402"
    assert err.fields == {
        "host": "host is a required field",
        "password": "password is a required field",
    }


def test_ssl_without_mode_is_missing() -> None:
    err = _fail(_body(ssl={"ca": PEM}))
    assert (err.code, err.fields) == ("FET-0402", {"ssl.mode": "ssl.mode is a required field"})


@pytest.mark.parametrize(
    "metadata", [_ABSENT, None, {}, {"serviceName": None}, {"serviceName": "  "}]
)
def test_oracle_requires_service_name(metadata: Any) -> None:
    err = _fail(_body(type="ORACLE", metadata=metadata))
    assert err.code == "FET-0402"
    assert err.fields == {"metadata.serviceName": "metadata.serviceName is a required field"}


@pytest.mark.parametrize(("given", "other"), [("userName", "password"), ("password", "userName")])
@pytest.mark.parametrize("absent", [_ABSENT, None])
def test_mongodb_credentials_are_optional_together(given: str, other: str, absent: Any) -> None:
    """§2.5: with exactly one of the two, the other is missing (absent or null alike)."""
    err = _fail(_body(type="MONGODB", **{other: absent}))
    assert (err.code, err.fields) == ("FET-0402", {other: f"{other} is a required field"})
    bare = _create(_body(type="MONGODB", userName=absent, password=absent))
    assert (bare.user_name, bare.password) == (None, None)


def test_mongodb_patch_clearing_one_credential_misses_it() -> None:
    stored = dataclasses.replace(STORED, type="MONGODB", schema=None, ssl=None)
    err = _patch_fail({"password": None}, stored=stored)
    assert (err.code, err.fields) == ("FET-0402", {"password": "password is a required field"})
    cleared = _patch({"userName": None, "password": None}, stored=stored)
    assert (cleared.user_name, cleared.password) == (None, None)


# --- step 5: values -------------------------------------------------------------------------


@pytest.mark.parametrize(("length", "ok"), [(2, False), (3, True), (100, True), (101, False)])
def test_config_name_length(length: int, ok: bool) -> None:
    body = _body(configName="c" * length)
    if ok:
        assert _create(body).config_name == "c" * length
    else:
        assert _invalid(body) == {"configName": "configName must be between 3 and 100 characters"}


@pytest.mark.parametrize("name", ["pg main", "pg.main", "pg/main", "pgé", "pg$"])
def test_config_name_characters(name: str) -> None:
    message = "configName can only contain alphanumeric characters, underscores, and hyphens"
    assert _invalid(_body(configName=name)) == {"configName": message}


@pytest.mark.parametrize("kind", ["postgresql", "MSSQL", "Oracle", "REDIS", 1, True])
def test_type_vocabulary(kind: Any) -> None:
    assert _invalid(_body(type=kind)) == {
        "type": "type must be one of [POSTGRESQL MYSQL SQL_SERVER ORACLE MONGODB SQLITE]"
    }


@pytest.mark.parametrize(
    "host",
    [
        "db.example.com",
        "db.example.com.",
        "localhost",
        "a",
        "a" * 63 + ".com",
        "xn--bcher-kva.example",
        "db-1.eu-west-1.rds.amazonaws.com",
        "10.0.0.1",
        "8.8.8.8",
        "::1",
        "2001:db8::1",
        "::ffff:10.0.0.1",
        ".".join(["a" * 63] * 3) + "." + "b" * 61,
    ],
)
def test_valid_hosts(host: str) -> None:
    assert len(host) <= 253
    assert is_valid_host(host)
    assert _create(_body(host=host)).host == host


@pytest.mark.parametrize(
    "host",
    [
        "-db.example.com",
        "db-.example.com",
        "a" * 64 + ".com",
        "db_example.com",
        "db example.com",
        "[::1]",
        "fe80::1%eth0",
        "256.1.1.1",
        "127.1",
        "2130706433",
        "http://db.example.com",
        "db.example.com:5432",
        "a..b",
        ".",
        "db.example.com..",
        "dé.example.com",
        ".".join(["a" * 63] * 4),
        1234,
        ["db"],
    ],
)
def test_invalid_hosts(host: Any) -> None:
    assert _invalid(_body(host=host)) == {"host": "host must be a valid hostname or IP address"}


def test_host_length_bound() -> None:
    assert not is_valid_host(".".join(["a" * 63] * 3) + "." + "b" * 62)  # 254 characters


@pytest.mark.parametrize(
    ("port", "message"),
    [
        (0, "port must be between 1 and 65535"),
        (-1, "port must be between 1 and 65535"),
        (65536, "port must be between 1 and 65535"),
        ("5432", "port must be an integer"),
        (True, "port must be an integer"),
        (False, "port must be an integer"),
        (5432.0, "port must be an integer"),
        (5432.5, "port must be an integer"),
        ([5432], "port must be an integer"),
    ],
)
def test_invalid_ports(port: Any, message: str) -> None:
    assert _invalid(_body(port=port)) == {"port": message}


@pytest.mark.parametrize("port", [1, 5432, 65535])
def test_valid_ports(port: int) -> None:
    assert _create(_body(port=port)).port == port


@pytest.mark.parametrize("char", ["?", "#", ";", "=", "/", "\x00", "\t", "\n", "\r", "\u00a0"])
def test_database_name_characters(char: str) -> None:
    assert _invalid(_body(databaseName=f"led{char}ger")) == {
        "databaseName": "databaseName contains invalid characters"
    }


def test_database_name_space_and_length() -> None:
    assert _create(_body(databaseName="my ledger")).database_name == "my ledger"
    assert _create(_body(databaseName="d" * 255)).database_name == "d" * 255
    assert set(_invalid(_body(databaseName="d" * 256))) == {"databaseName"}


@pytest.mark.parametrize("kind", ["POSTGRESQL", "SQL_SERVER", "ORACLE"])
def test_schema_allowed(kind: str) -> None:
    body = _body(type=kind, schema="s" * 128, metadata={"serviceName": "svc"})
    assert _create(body).schema == "s" * 128


@pytest.mark.parametrize("kind", ["MYSQL", "MONGODB"])
def test_schema_not_supported(kind: str) -> None:
    assert _invalid(_body(type=kind, schema="x")) == {
        "schema": f"schema is not supported for type {kind}"
    }


def test_schema_too_long_and_blank() -> None:
    assert set(_invalid(_body(schema="s" * 129))) == {"schema"}
    assert _create(_body(schema="  ")).schema is None
    assert _create(_body(type="MYSQL", schema=None)).schema is None


def test_user_name_length() -> None:
    assert _create(_body(userName="u" * 128)).user_name == "u" * 128
    assert set(_invalid(_body(userName="u" * 129))) == {"userName"}


def test_password_length() -> None:
    assert _create(_body(password="p" * 1024)).password == "p" * 1024
    assert set(_invalid(_body(password="p" * 1025))) == {"password"}
    assert set(_invalid(_body(password=1234))) == {"password"}


def test_every_invalid_field_is_listed() -> None:
    fields = _invalid(_body(configName="x", host="-bad", port=0, databaseName="a;b"))
    assert set(fields) == {"configName", "host", "port", "databaseName"}


# --- ssl ------------------------------------------------------------------------------------

VOCABULARIES = {
    "POSTGRESQL": "disable allow prefer require verify-ca verify-full",
    "MYSQL": "false true skip-verify preferred",
    "SQL_SERVER": "disable false true strict",
    "ORACLE": "disable false true enable verify skip-verify",
    "MONGODB": "disable false true enable insecure",
}


def _typed(kind: str, **overrides: Any) -> dict[str, Any]:
    metadata = {"serviceName": "svc"} if kind == "ORACLE" else _ABSENT
    return _body(type=kind, metadata=metadata, **overrides)


def test_vocabularies_are_the_contract_rows() -> None:
    assert {k: " ".join(v) for k, v in SSL_MODES.items()} == VOCABULARIES


@pytest.mark.parametrize(
    ("kind", "mode"), [(k, m) for k, v in VOCABULARIES.items() for m in v.split()]
)
def test_every_mode_of_every_type(kind: str, mode: str) -> None:
    ssl = _create(_typed(kind, ssl={"mode": mode})).ssl
    assert ssl == SslInput(mode=mode)


@pytest.mark.parametrize("kind", sorted(VOCABULARIES))
@pytest.mark.parametrize("mode", ["nope", "REQUIRE", "True", "verify_full"])
def test_foreign_mode_alone_is_fet_0413(kind: str, mode: str) -> None:
    err = _fail(_typed(kind, ssl={"mode": mode}))
    message = f"ssl.mode must be one of [{VOCABULARIES[kind]}]"
    assert (err.code, title_for(err), err.message) == ("FET-0413", "Invalid SSL Mode", message)
    assert err.fields == {"ssl.mode": message}


def test_cross_type_mode_is_rejected() -> None:
    assert _fail(_typed("MYSQL", ssl={"mode": "require"})).code == "FET-0413"
    assert _fail(_typed("POSTGRESQL", ssl={"mode": "skip-verify"})).code == "FET-0413"


def test_mode_error_with_other_errors_is_fet_0001() -> None:
    fields = _invalid(_body(port=0, ssl={"mode": "nope"}))
    assert fields == {
        "port": "port must be between 1 and 65535",
        "ssl.mode": f"ssl.mode must be one of [{VOCABULARIES['POSTGRESQL']}]",
    }


@pytest.mark.parametrize("ssl", [None, {}, {"mode": ""}, {"mode": "  "}])
def test_no_tls(ssl: Any) -> None:
    assert _create(_body(ssl=ssl)).ssl is None


def test_empty_mode_with_pem_is_kept() -> None:
    assert _create(_body(ssl={"mode": "", "ca": PEM})).ssl == SslInput(mode="", ca=PEM)


def test_pem_is_not_trimmed_and_ca_is_optional() -> None:
    ssl = _create(_body(ssl={"mode": "verify-full", "cert": PEM + "\n\n", "key": KEY})).ssl
    assert ssl is not None
    assert ssl.cert == PEM + "\n\n"
    assert ssl.ca is None


@pytest.mark.parametrize("name", ["ca", "cert", "key"])
def test_pem_prefix(name: str) -> None:
    ssl = {"mode": "require", "cert": PEM, "key": KEY, name: " " + PEM}
    assert set(_invalid(_body(ssl=ssl))) == {f"ssl.{name}"}


def test_cert_and_key_together() -> None:
    message = "ssl.cert and ssl.key must be provided together"
    assert _invalid(_body(ssl={"mode": "require", "cert": PEM})) == {"ssl.key": message}
    assert _invalid(_body(ssl={"mode": "require", "key": KEY})) == {"ssl.cert": message}


@pytest.mark.parametrize("ssl", ["require", ["require"], True])
def test_ssl_must_be_an_object(ssl: Any) -> None:
    assert _invalid(_body(ssl=ssl)) == {"ssl": "ssl must be an object"}


def test_ssl_mode_must_be_a_string() -> None:
    assert set(_invalid(_body(ssl={"mode": 1}))) == {"ssl.mode"}


# --- metadata -------------------------------------------------------------------------------


def test_metadata_key_bounds() -> None:
    assert _create(_body(metadata={"k" * 100: 1})).metadata == {"k" * 100: 1}
    err = _fail(_body(metadata={"k" * 101: 1}))
    assert (err.code, title_for(err)) == ("FET-0412", "Metadata Key Too Long")
    assert err.fields == {f"metadata.{'k' * 101}": "metadata key must be 1 to 100 characters"}
    assert _fail(_body(metadata={"": 1})).code == "FET-0412"


def test_metadata_value_bounds() -> None:
    assert _create(_body(metadata={"k": "v" * 2000})).metadata == {"k": "v" * 2000}
    err = _fail(_body(metadata={"k": "v" * 2001}))
    assert (err.code, title_for(err)) == ("FET-0411", "Metadata Value Too Long")
    assert err.fields == {"metadata.k": "metadata value must not exceed 2000 characters"}


@pytest.mark.parametrize("value", [{"a": 1}, [1, 2], []])
def test_metadata_nesting(value: Any) -> None:
    err = _fail(_body(metadata={"k": value, "j": "ok"}))
    assert (err.code, title_for(err)) == ("FET-0410", "Invalid Metadata Nesting")
    assert err.fields == {"metadata.k": "metadata value must be a string, number, boolean or null"}


def test_metadata_scalars_and_null() -> None:
    md = {"s": "x", "i": 1, "f": 1.5, "b": False, "n": None}
    assert _create(_body(metadata=md)).metadata == md
    assert _create(_body(metadata=None)).metadata == {}


def test_metadata_must_be_an_object() -> None:
    assert _invalid(_body(metadata=["a"])) == {"metadata": "metadata must be an object"}


@pytest.mark.parametrize("key", ["serviceName", "authSource"])
@pytest.mark.parametrize("value", ["svc)(x", "a b", "a/b", "s" * 129, 5, True])
def test_reserved_metadata_pattern(key: str, value: Any) -> None:
    assert _invalid(_body(type="MONGODB", metadata={key: value})) == {
        f"metadata.{key}": f"metadata.{key} contains invalid characters"
    }


@pytest.mark.parametrize("value", ["ORCL", "orcl.pdb1_x-y$", "s" * 128])
def test_reserved_metadata_accepted(value: str) -> None:
    metadata = {"serviceName": value, "authSource": value}
    assert _create(_body(type="ORACLE", metadata=metadata)).metadata == metadata


# --- SQLITE (§2.5.1) ------------------------------------------------------------------------


@pytest.fixture
def sqlite_dir(tmp_path: Path) -> Path:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    _make_db(allowed / "demo.db")
    return allowed


def _make_db(path: Path) -> None:
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE t (id INTEGER)")
        db.commit()


def _sqlite(path: object, allowed: Path, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"configName": "lite", "type": "SQLITE", "databaseName": path}
    body.update(extra)
    return body


def _embedded(allowed: Path | None, store: Path | None = None) -> dict[str, Any]:
    return {
        "embedded": True,
        "sqlite_allowed_dir": str(allowed) if allowed else None,
        "metadata_store_path": str(store) if store else None,
    }


def test_sqlite_valid(sqlite_dir: Path) -> None:
    conn = _create(_sqlite(str(sqlite_dir / "demo.db"), sqlite_dir), **_embedded(sqlite_dir))
    assert conn.type == "SQLITE"
    assert conn.database_name == str(sqlite_dir / "demo.db")
    assert (conn.host, conn.port, conn.user_name, conn.password, conn.ssl) == (None,) * 5


def test_sqlite_outside_embedded_mode(sqlite_dir: Path) -> None:
    body = _sqlite(str(sqlite_dir / "demo.db"), sqlite_dir)
    assert set(_invalid(body, sqlite_allowed_dir=str(sqlite_dir))) == {"type"}


def test_sqlite_disabled_without_allowed_dir(sqlite_dir: Path) -> None:
    body = _sqlite(str(sqlite_dir / "demo.db"), sqlite_dir)
    assert _invalid(body, **_embedded(None)) == {"type": "SQLITE connections are disabled"}


@pytest.mark.parametrize("field", ["host", "port", "userName", "password"])
def test_sqlite_network_fields_not_supported(sqlite_dir: Path, field: str) -> None:
    body = _sqlite(str(sqlite_dir / "demo.db"), sqlite_dir, **{field: _body()[field]})
    assert _invalid(body, **_embedded(sqlite_dir)) == {
        field: f"{field} is not supported for type SQLITE"
    }


def test_sqlite_ssl_not_supported(sqlite_dir: Path) -> None:
    body = _sqlite(str(sqlite_dir / "demo.db"), sqlite_dir, ssl={"mode": "require"})
    assert _invalid(body, **_embedded(sqlite_dir)) == {
        "ssl": "ssl is not supported for type SQLITE"
    }
    body["ssl"] = {}
    assert _create(body, **_embedded(sqlite_dir)).ssl is None


def test_sqlite_schema_not_supported(sqlite_dir: Path) -> None:
    body = _sqlite(str(sqlite_dir / "demo.db"), sqlite_dir, schema="main")
    assert _invalid(body, **_embedded(sqlite_dir)) == {
        "schema": "schema is not supported for type SQLITE"
    }


def _location_error(path: object, allowed: Path, store: Path | None = None) -> None:
    body = _sqlite(path, allowed)
    assert _invalid(body, **_embedded(allowed, store)) == {"databaseName": SQLITE_LOCATION_MESSAGE}


def test_sqlite_relative_path(sqlite_dir: Path) -> None:
    _location_error("demo.db", sqlite_dir)


def test_sqlite_missing_file(sqlite_dir: Path) -> None:
    _location_error(str(sqlite_dir / "nope.db"), sqlite_dir)


def test_sqlite_outside_allowed_dir(tmp_path: Path, sqlite_dir: Path) -> None:
    _make_db(tmp_path / "outside.db")
    _location_error(str(tmp_path / "outside.db"), sqlite_dir)
    _location_error(str(sqlite_dir / ".." / "outside.db"), sqlite_dir)


def test_sqlite_sibling_prefix_dir(tmp_path: Path, sqlite_dir: Path) -> None:
    sibling = tmp_path / "allowed2"
    sibling.mkdir()
    _make_db(sibling / "x.db")
    _location_error(str(sibling / "x.db"), sqlite_dir)


def test_sqlite_symlink_escaping(tmp_path: Path, sqlite_dir: Path) -> None:
    _make_db(tmp_path / "secret.db")
    (sqlite_dir / "link.db").symlink_to(tmp_path / "secret.db")
    _location_error(str(sqlite_dir / "link.db"), sqlite_dir)


def test_sqlite_symlink_inside_is_refused(sqlite_dir: Path) -> None:
    """§2.5.1 (version 2): the last component must not be a symbolic link, even one that
    points at a valid file inside the allowed directory."""
    (sqlite_dir / "alias.db").symlink_to(sqlite_dir / "demo.db")
    _location_error(str(sqlite_dir / "alias.db"), sqlite_dir)
    assert _create(_sqlite(str(sqlite_dir / "demo.db"), sqlite_dir), **_embedded(sqlite_dir))


def test_sqlite_not_an_sqlite_file(sqlite_dir: Path) -> None:
    (sqlite_dir / "notes.txt").write_text("hello, not a database")
    _location_error(str(sqlite_dir / "notes.txt"), sqlite_dir)
    (sqlite_dir / "empty.db").write_bytes(b"")
    _location_error(str(sqlite_dir / "empty.db"), sqlite_dir)


def test_sqlite_directory(sqlite_dir: Path) -> None:
    (sqlite_dir / "sub").mkdir()
    _location_error(str(sqlite_dir / "sub"), sqlite_dir)
    _location_error(str(sqlite_dir), sqlite_dir)


def test_sqlite_metadata_store_rejected(sqlite_dir: Path) -> None:
    store = sqlite_dir / "fetcher.db"
    _make_db(store)
    _location_error(str(store), sqlite_dir, store)
    os.link(store, sqlite_dir / "hardlink.db")
    _location_error(str(sqlite_dir / "hardlink.db"), sqlite_dir, store)


def test_sqlite_nul_in_path(sqlite_dir: Path) -> None:
    body = _sqlite(str(sqlite_dir / "demo.db") + "\x00x", sqlite_dir)
    assert _invalid(body, **_embedded(sqlite_dir)) == {
        "databaseName": "databaseName contains invalid characters"
    }


def test_sqlite_location_function_directly(sqlite_dir: Path) -> None:
    assert sqlite_location_ok(str(sqlite_dir / "demo.db"), allowed_dir=str(sqlite_dir))
    assert not sqlite_location_ok("/etc/passwd", allowed_dir=str(sqlite_dir))


# --- PATCH (§2.6.5) -------------------------------------------------------------------------

STORED = ConnectionInput(
    config_name="pg_main",
    type="POSTGRESQL",
    database_name="ledger",
    host="db.example.com",
    port=5432,
    schema="accounting",
    user_name="reader",
    password=None,
    ssl=SslInput(mode="require", cert=PEM, key=None),
    metadata={"team": "core"},
)


def _patch(body: dict[str, Any], stored: ConnectionInput = STORED, **ctx: Any) -> ConnectionInput:
    return validate_connection_patch(stored, body, **{**SERVER, **ctx})


def _patch_fail(body: dict[str, Any], stored: ConnectionInput = STORED, **ctx: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        _patch(body, stored, **ctx)
    return caught.value


def test_patch_empty_body() -> None:
    err = _patch_fail({})
    assert (err.code, title_for(err), err.message) == (
        "FET-0001",
        "Invalid payload",
        "empty request body",
    )


def test_patch_product_name_is_unknown() -> None:
    err = _patch_fail({"productName": "x"})
    assert (err.code, err.fields) == ("FET-0400", {"productName": "unexpected field"})


def test_patch_absent_fields_are_unchanged() -> None:
    merged = _patch({"port": 6543})
    assert merged.port == 6543
    assert merged.host == STORED.host
    assert merged.ssl == STORED.ssl
    assert merged.metadata == {"team": "core"}
    assert merged.password is None  # kept: the stored ciphertext stays


def test_patch_null_clears_optional_fields() -> None:
    merged = _patch({"schema": None, "ssl": None, "metadata": None})
    assert (merged.schema, merged.ssl, merged.metadata) == (None, None, {})


@pytest.mark.parametrize(
    "field", ["configName", "type", "host", "port", "databaseName", "userName", "password"]
)
def test_patch_null_on_other_fields(field: str) -> None:
    err = _patch_fail({field: None})
    assert (err.code, title_for(err)) == ("FET-0001", "Bad Request")
    assert err.fields == {field: f"{field} cannot be null"}


@pytest.mark.parametrize("field", ["configName", "host", "databaseName", "userName", "password"])
def test_patch_blank_required_field_is_invalid_not_missing(field: str) -> None:
    err = _patch_fail({field: ""})
    assert (err.code, title_for(err)) == ("FET-0001", "Bad Request")
    assert err.fields is not None
    assert set(err.fields) == {field}


def test_patch_replaces_ssl_and_metadata() -> None:
    merged = _patch({"ssl": {"mode": "verify-full"}, "metadata": {"x": 1}})
    assert merged.ssl == SslInput(mode="verify-full")
    assert merged.metadata == {"x": 1}


def test_patch_password_is_validated_when_sent() -> None:
    assert _patch({"password": "  new  "}).password == "  new  "
    assert set(_patch_fail({"password": "p" * 1025}).fields or {}) == {"password"}


def test_patch_type_change_checks_the_stored_ssl_mode() -> None:
    err = _patch_fail({"type": "MYSQL", "schema": None})
    assert (err.code, err.fields) == (
        "FET-0413",
        {"ssl.mode": f"ssl.mode must be one of [{VOCABULARIES['MYSQL']}]"},
    )


def test_patch_type_change_checks_the_stored_schema() -> None:
    err = _patch_fail({"type": "MONGODB", "ssl": None})
    assert err.fields == {"schema": "schema is not supported for type MONGODB"}


def test_patch_type_change_to_oracle_requires_service_name() -> None:
    err = _patch_fail({"type": "ORACLE", "ssl": None})
    assert err.code == "FET-0402"
    assert err.fields == {"metadata.serviceName": "metadata.serviceName is a required field"}
    merged = _patch({"type": "ORACLE", "ssl": None, "metadata": {"serviceName": "svc"}})
    assert merged.type == "ORACLE"


def test_patch_type_change_to_sqlite_clears_credentials(sqlite_dir: Path) -> None:
    body = {"type": "SQLITE", "databaseName": str(sqlite_dir / "demo.db"), "schema": None}
    body["ssl"] = None
    merged = _patch(body, **_embedded(sqlite_dir))
    assert merged.type == "SQLITE"
    assert (merged.host, merged.port, merged.user_name, merged.password) == (None,) * 4


def test_patch_type_change_to_sqlite_with_a_sent_host(sqlite_dir: Path) -> None:
    body = {
        "type": "SQLITE",
        "databaseName": str(sqlite_dir / "demo.db"),
        "schema": None,
        "ssl": None,
        "host": "db.example.com",
    }
    err = _patch_fail(body, **_embedded(sqlite_dir))
    assert err.fields == {"host": "host is not supported for type SQLITE"}


def test_patch_sqlite_disabled(sqlite_dir: Path) -> None:
    stored = ConnectionInput(config_name="lite", type="SQLITE", database_name="/x.db")
    err = _patch_fail({"configName": "lite2"}, stored, **_embedded(None))
    assert err.fields == {"type": "SQLITE connections are disabled"}


def test_patch_sqlite_to_network_type_requires_credentials(sqlite_dir: Path) -> None:
    stored = ConnectionInput(
        config_name="lite", type="SQLITE", database_name=str(sqlite_dir / "demo.db")
    )
    err = _patch_fail({"type": "POSTGRESQL", "databaseName": "ledger"}, stored)
    assert err.code == "FET-0402"
    assert set(err.fields or {}) == {"host", "port", "userName", "password"}
    merged = _patch(
        {
            "type": "POSTGRESQL",
            "databaseName": "ledger",
            "host": "db.example.com",
            "port": 5432,
            "userName": "u",
            "password": "p",
        },
        stored,
    )
    assert merged.password == "p"


def test_patch_sent_ssl_without_mode_is_missing() -> None:
    err = _patch_fail({"ssl": {"ca": PEM}})
    assert (err.code, err.fields) == ("FET-0402", {"ssl.mode": "ssl.mode is a required field"})
