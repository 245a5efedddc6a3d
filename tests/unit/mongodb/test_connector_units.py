"""MongoDB connector pieces without a server: client options (§2.9.1, §11.1, §11.2), TLS
files, sampling sizes and type priority (§11.3, §11.4), the filter document (§3.4, §1.4)."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp
from pymongo import AsyncMongoClient

from fetcher.adapters.mongodb import (
    MongoConnector,
    _document_count,
    _list_collections,
    client_options,
    coerce_filters,
    filter_to_bson,
    flatten_filter,
    sample_size,
    sampled_columns,
    tls_files,
)
from fetcher.engine import EngineError, ErrorCategory
from fetcher.engine.filters.ast import BoundCondition, BoundFieldFilter, Operator
from fetcher.engine.filters.mongo import render_mongo_filter
from fetcher.engine.model import ConnectionDescriptor, TlsSettings
from fetcher.engine.types import Column, EngineType, TypeFamily

PEM_CA = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
PEM_CERT = "-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----"
PEM_KEY = "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n"


def _conn(**overrides: Any) -> ConnectionDescriptor:
    values: dict[str, Any] = {
        "config_name": "m",
        "type": EngineType.MONGODB,
        "host": "mongo.example.com",
        "port": 27017,
        "database": "ledger",
    }
    values.update(overrides)
    return ConnectionDescriptor(**values)


def test_options_are_keyword_arguments_without_credentials() -> None:
    options = client_options(_conn(port=None), pinned_address=None)
    assert options["host"] == "mongo.example.com"
    assert options["port"] == 27017
    assert options["directConnection"] is False
    assert options["tls"] is False
    assert options["connectTimeoutMS"] == 10_000
    assert options["serverSelectionTimeoutMS"] == 10_000
    assert "username" not in options
    assert "password" not in options
    assert "authSource" not in options
    assert "authMechanism" not in options
    assert not any("mongodb://" in str(v) for v in options.values())


def test_credentials_and_auth_source() -> None:
    options = client_options(_conn(username="app", password="pw"), pinned_address=None)
    assert (options["username"], options["password"], options["authSource"]) == (
        "app",
        "pw",
        "admin",
    )
    custom = _conn(username="app", password="pw", metadata={"authSource": "ledger"})
    assert client_options(custom, pinned_address=None)["authSource"] == "ledger"


@pytest.mark.parametrize(
    ("flag", "direct"),
    [(True, True), ("true", True), ("TRUE", True), ("false", False), (False, False), (1, False)],
)
def test_metadata_direct_connection(flag: object, direct: bool) -> None:
    options = client_options(_conn(metadata={"directConnection": flag}), pinned_address=None)
    assert options["directConnection"] is direct


def test_pinned_address_is_dialled_and_forces_direct_connection() -> None:
    conn = _conn(metadata={"directConnection": "false"})
    options = client_options(conn, pinned_address="203.0.113.9")
    assert options["host"] == "203.0.113.9"
    assert options["directConnection"] is True


@pytest.mark.parametrize(
    ("host", "pinned", "dialled"),
    [
        ("2001:db8::5", None, "[2001:db8::5]"),
        ("F:9:f:5A06:Cc::", None, "[F:9:f:5A06:Cc::]"),
        ("db.example.com", "2001:db8::7", "[2001:db8::7]"),
        ("db.example.com", None, "db.example.com"),
    ],
)
def test_ipv6_literals_are_bracketed_for_pymongo(
    host: str, pinned: str | None, dialled: str
) -> None:
    """§2.5 accepts bare IPv6 hosts; pymongo refuses them unbracketed (it was a 500 on /test)."""
    options = client_options(_conn(host=host), pinned_address=pinned)
    assert options["host"] == dialled
    client = AsyncMongoClient(**options, connect=False)
    assert len(client.topology_description.server_descriptions()) == 1


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("", {"tls": False}),
        ("disable", {"tls": False}),
        ("false", {"tls": False}),
        ("true", {"tls": True}),
        ("enable", {"tls": True}),
        ("insecure", {"tls": True, "tlsInsecure": True}),
    ],
)
def test_tls_modes(mode: str, expected: dict[str, object]) -> None:
    options = client_options(_conn(ssl=TlsSettings(mode)), pinned_address=None)
    tls = {k: v for k, v in options.items() if k.startswith("tls")}
    assert tls == expected


def test_tls_files_are_private_and_unlinked() -> None:
    settings = TlsSettings("true", ca=PEM_CA, cert=PEM_CERT, key=PEM_KEY)
    with tls_files(settings) as files:
        assert set(files) == {"ca", "cert_key"}
        for path in files.values():
            assert os.stat(path).st_mode & 0o777 == 0o600
        with open(files["cert_key"], encoding="utf-8") as handle:
            combined = handle.read()
        assert "CERT" in combined
        assert "KEY" in combined
        options = client_options(_conn(ssl=settings), pinned_address=None, tls_files=files)
        assert options["tlsCAFile"] == files["ca"]
        assert options["tlsCertificateKeyFile"] == files["cert_key"]
        assert options["authMechanism"] == "MONGODB-X509"  # no credentials: X.509 login
    assert not any(os.path.exists(p) for p in files.values())


def test_no_tls_files_when_tls_is_off() -> None:
    with tls_files(TlsSettings("disable", ca=PEM_CA)) as files:
        assert files == {}


def test_descriptor_repr_of_options_never_holds_a_password_in_errors() -> None:
    connector = MongoConnector(_conn(username="app", password="hunter2-secret"))
    assert "hunter2-secret" not in repr(connector.__dict__)


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        MongoConnector(_conn(), batch_size=0)


@pytest.mark.parametrize(
    ("count", "size"),
    [
        (0, None),
        (1_000, None),
        (1_001, 1_000),
        (10_000, 1_000),
        (10_001, 2_000),
        (100_000, 2_000),
        (100_001, 5_000),
        (1_000_000, 5_000),
        (1_000_001, 10_000),
    ],
)
def test_sample_sizes(count: int, size: int | None) -> None:
    assert sample_size(count) == size


def test_empty_collection_lists_id_only() -> None:
    assert sampled_columns([]) == (Column("_id", TypeFamily.TEXT, "objectId"),)


def test_type_priority_and_families() -> None:
    uid = Binary(uuid.uuid4().bytes, 4)
    docs: list[dict[str, Any]] = [
        {"_id": 1, "a": "text", "b": 1, "c": Decimal128("1"), "u": b"raw", "n": None, "x": 1.5},
        {"_id": ObjectId(), "a": datetime(2026, 1, 1), "b": Timestamp(1, 1), "c": 2.5, "u": uid},
        {"a": Timestamp(5, 0), "b": Int64(3), "x": 2, "o": {"k": 1}, "l": [1], "r": Regex("a")},
        {"t": True, "n": None},
    ]
    columns = {c.name: (c.family, c.native_type) for c in sampled_columns(docs)}
    assert columns == {
        "_id": (TypeFamily.TEXT, "objectId"),
        "a": (TypeFamily.TIMESTAMPTZ, "date"),
        "b": (TypeFamily.TIMESTAMPTZ, "timestamp"),
        "c": (TypeFamily.DECIMAL, "decimal"),
        "u": (TypeFamily.UUID, "uuid"),
        "x": (TypeFamily.FLOAT, "double"),
        "o": (TypeFamily.JSON, "object"),
        "l": (TypeFamily.JSON, "array"),
        "r": (TypeFamily.OTHER, "regex"),
        "t": (TypeFamily.BOOLEAN, "bool"),
        "n": (TypeFamily.OTHER, "null"),
    }
    assert next(c.name for c in sampled_columns(docs)) == "_id"


def _ff(column: Column, op: Operator, *values: object) -> BoundFieldFilter:
    return BoundFieldFilter(column, (BoundCondition(op, tuple(values)),))


def test_markers_become_bson_values_and_operators_stay() -> None:
    oid = Column("_id", TypeFamily.TEXT, "objectId")
    when = Column("at", TypeFamily.TIMESTAMPTZ, "date")
    uid = Column("u", TypeFamily.UUID, "uuid")
    dec = Column("d", TypeFamily.DECIMAL, "decimal")
    name = Column("name", TypeFamily.TEXT, "string")
    u = uuid.UUID("0123abcd-4567-89ab-cdef-0123456789ab")
    rendered = render_mongo_filter(
        [
            _ff(oid, Operator.EQ, "0123456789ABCDEF01234567"),
            _ff(when, Operator.GTE, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
            _ff(uid, Operator.IN, u, None),
            _ff(dec, Operator.LT, Decimal("2.50")),
            _ff(name, Operator.LIKE, "a.b%"),
        ]
    )
    converted = filter_to_bson(rendered)
    parts = converted["$and"]
    assert parts[0] == {"_id": ObjectId("0123456789abcdef01234567")}
    assert parts[1] == {"at": {"$gte": datetime(2026, 1, 2, 3, 4, 5)}}
    assert parts[2] == {"u": {"$in": [Binary(u.bytes, 4), None]}}
    assert parts[2]["u"]["$in"][0].subtype == 4
    assert parts[3] == {"d": {"$lt": Decimal128("2.50")}}
    assert parts[4] == {"name": {"$regex": "^a\\.b", "$options": "is"}}


def test_numbers_are_fitted_to_bson_by_sampled_type() -> None:
    integer = Column("n", TypeFamily.INTEGER, "int")
    decimal = Column("d", TypeFamily.DECIMAL, "decimal")
    coerced = coerce_filters(
        [
            _ff(integer, Operator.GT, Decimal("2.5")),
            _ff(integer, Operator.LT, 2**70),
            _ff(decimal, Operator.GT, Decimal("2.5")),
            _ff(integer, Operator.EQ, True, 7),
        ]
    )
    values = [c.conditions[0].values for c in coerced]
    assert values == [(2.5,), (Decimal(2**70),), (Decimal("2.5"),), (True, 7)]
    assert isinstance(values[0][0], float)
    assert isinstance(values[3][0], bool)


async def test_unopened_connector_fails_with_the_phase_category() -> None:
    connector = MongoConnector(_conn())
    with pytest.raises(EngineError) as caught:
        await connector.discover([])
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    with pytest.raises(EngineError) as probe:
        await connector.probe()
    assert probe.value.category is ErrorCategory.CONNECT


def test_single_and_is_flattened_only_when_equivalent() -> None:
    assert flatten_filter({"$and": [{"a": None}, {"b": {"$gt": 1}}]}) == {
        "a": None,
        "b": {"$gt": 1},
    }
    nested = {"$and": [{"$and": [{"a": 1}, {"a": 2}]}, {"b": 1}]}
    assert flatten_filter(nested) is nested
    repeated = {"$and": [{"a": {"$gt": 1}}, {"a": {"$lt": 5}}]}
    assert flatten_filter(repeated) is repeated
    assert flatten_filter({}) == {}


class _Listing:
    """A stand-in for ``listCollections`` (nx-27017 cannot hold a ``system.*`` name)."""

    def __init__(self, infos: list[dict[str, object]]) -> None:
        self.infos = infos

    async def list_collections(self) -> Any:
        infos = self.infos

        class _Cursor:
            def __aiter__(self) -> Any:
                return self._gen()

            async def _gen(self) -> Any:
                for info in infos:
                    yield info

        return _Cursor()


async def test_system_collections_are_not_listed() -> None:
    listing = _Listing(
        [
            {"name": "orders", "type": "collection"},
            {"name": "system.views", "type": "collection"},
            {"name": "system.js", "type": "collection"},
            {"name": "big_orders", "type": "view"},
            {"name": "systemic", "type": "collection"},
        ]
    )
    listed = await _list_collections(listing, "ds")  # type: ignore[arg-type]
    assert listed == [("orders", "collection"), ("big_orders", "view"), ("systemic", "collection")]


# --- issue 24: answers of a shape discovery does not expect -------------------------------

DISCOVERY = "failed to discover datasource schema 'ds'"


@pytest.mark.parametrize(
    ("info", "column", "kind"),
    [
        ({"name": 7, "type": "collection"}, "name", "int"),
        ({"name": "c", "type": []}, "type", "list"),
    ],
)
async def test_mongodb_listing_of_another_shape_names_the_field(
    info: dict[str, Any], column: str, kind: str
) -> None:
    with pytest.raises(EngineError) as caught:
        await _list_collections(_Listing([info]), "ds")  # type: ignore[arg-type]
    assert caught.value.text() == (
        f"{DISCOVERY}: the catalog column 'listCollections.{column}' holds a {kind} value"
    )


class _Counting:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    async def estimated_document_count(self) -> object:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "kind"), [("many", "str"), (2.5, "float"), (ValueError("int('x')"), "NoneType")]
)
async def test_mongodb_count_that_is_not_an_integer_is_a_discovery_failure(
    answer: object, kind: str
) -> None:
    with pytest.raises(EngineError) as caught:
        await _document_count(_Counting(answer), "collection", "ds")
    assert caught.value.text() == f"{DISCOVERY}: the catalog column 'count.n' holds a {kind} value"
