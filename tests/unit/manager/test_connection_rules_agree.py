"""Each cross-field connection rule (``fetcher.services.connections.rules``) yields a check and a
schema fragment; on create bodies that vary exactly what those rules look at, the published
``ConnectionCreate`` schema accepts a body exactly when the validator does (``jsonschema_rs``,
the validator schemathesis uses).

Not generated: ``null`` credentials on create. The validator reads a MONGODB ``userName`` or
``password`` sent as ``null`` as absent (§2.5 pairs them), while the schema admits only their
absence; that gap predates the rule objects and is left as published (``/openapi.json`` is
pinned byte for byte)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from fetcher.engine import DEFAULT_LIMITS
from fetcher.manager import openapi
from fetcher.services.connections.validation import validate_connection_create
from fetcher.services.errors import ApiError

PEM = "-----BEGIN CERTIFICATE-----"
_ABSENT = object()
#: Which of ``host``, ``port``, ``userName`` and ``password`` a body sends.
_NETWORK = {
    "all": ("host", "port", "userName", "password"),
    "no credentials": ("host", "port"),
    "userName only": ("host", "port", "userName"),
    "password only": ("host", "port", "password"),
    "none": (),
    "host only": ("host",),
}
_VALUES = {"host": "db.example.com", "port": 5432, "userName": "reader", "password": "s3cret"}


def _valid_or(valid: object, *others: object) -> st.SearchStrategy[object]:
    """The valid value about half of the time, else one of ``others``, so that most bodies
    break at most one or two rules and the rule that decides is the one varied."""
    return st.one_of(st.just(valid), st.sampled_from(others))


#: What the five rules read: the type, the network fields, the PEM pair, ``metadata``, ``schema``.
_VARIANTS: dict[str, st.SearchStrategy[object]] = {
    "type": st.sampled_from(["POSTGRESQL", "MYSQL", "SQL_SERVER", "ORACLE", "MONGODB", "SQLITE"]),
    "network": st.sampled_from(list(_NETWORK)),
    "ssl": _valid_or(
        _ABSENT,
        None,
        {},
        {"mode": ""},
        {"mode": "", "cert": PEM, "key": PEM},
        {"mode": "", "cert": PEM},
        {"mode": "", "key": PEM, "cert": ""},
        {"mode": "", "ca": PEM, "key": None},
        {"mode": "", "cert": None, "key": ""},
    ),
    "metadata": _valid_or(
        {"serviceName": "XEPDB1"},
        _ABSENT,
        None,
        {},
        {"serviceName": " "},
        {"serviceName": ""},
        {"team": "a"},
        {"authSource": "admin"},
    ),
    "schema": _valid_or(_ABSENT, None, "", "  ", "public"),
}


def _body(variant: dict[str, Any], sqlite_dir: Path) -> dict[str, Any]:
    body: dict[str, Any] = {"configName": "conn_1", "type": variant["type"]}
    body["databaseName"] = str(sqlite_dir / "local.db") if body["type"] == "SQLITE" else "ledger"
    body |= {name: _VALUES[name] for name in _NETWORK[variant["network"]]}
    body |= {k: variant[k] for k in ("ssl", "metadata", "schema") if variant[k] is not _ABSENT}
    return body


@pytest.fixture(scope="module")
def sqlite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("sqlite")
    with sqlite3.connect(directory / "local.db") as db:
        db.execute("CREATE TABLE t (id INTEGER)")  # written: the file has its SQLite header
    return directory


def _accepted(body: dict[str, Any], sqlite_dir: Path) -> bool:
    try:
        validate_connection_create(
            body, embedded=True, sqlite_allowed_dir=str(sqlite_dir), metadata_store_path=None
        )
    except ApiError:
        return False
    return True


@settings(max_examples=500, deadline=None)
@given(st.fixed_dictionaries(_VARIANTS))
def test_create_schema_and_validator_agree_on_the_cross_field_rules(
    sqlite_dir: Path, variant: dict[str, Any]
) -> None:
    body = _body(variant, sqlite_dir)
    components = openapi.request_components(sqlite=True, max_limits=DEFAULT_LIMITS)
    schema = jsonschema_rs.Draft202012Validator(
        components["ConnectionCreate"], validate_formats=True
    )
    accepted = _accepted(body, sqlite_dir)
    event(f"accepted: {accepted}")
    assert schema.is_valid(body) == accepted, body
