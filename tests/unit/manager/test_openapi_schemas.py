"""The request schemas of ``/openapi.json`` agree with the validators they describe.

Each schema is checked with ``jsonschema_rs`` (the validator schemathesis uses, with formats
asserted) against the service-side rule it documents, on hand-picked and generated values.
"""

from __future__ import annotations

import contextlib
import re
import sys
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.engine import DEFAULT_LIMITS, EngineError
from fetcher.engine.kit import OPERATOR_ARITY, parse_filters
from fetcher.manager import openapi
from fetcher.services.api import shapes
from fetcher.services.api.shapes import is_valid_host
from fetcher.services.connections.validation import (
    validate_connection_create,
    validate_product_header,
)
from fetcher.services.errors import ApiError
from tests.unit.manager.conftest import Harness, HarnessFactory

C = "/v1/management/connections"
_HOST_CHARS = st.sampled_from([*"ab9-.:0f1 \t", "\u2003", "\x1c", "\x85"])


def _validator(schema: dict[str, Any]) -> Any:
    return jsonschema_rs.Draft202012Validator(schema, validate_formats=True)


def _create(sqlite: bool = False) -> Any:
    components = openapi.request_components(sqlite=sqlite, max_limits=DEFAULT_LIMITS)
    return _validator(components["ConnectionCreate"])


def _accepted(body: dict[str, Any]) -> bool:
    try:
        validate_connection_create(
            body, embedded=True, sqlite_allowed_dir=None, metadata_store_path=None
        )
    except ApiError:
        return False
    return True


def test_whitespace_class_is_exactly_what_strip_removes() -> None:
    pattern = re.compile(shapes.WS)
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        assert bool(pattern.fullmatch(char)) == char.isspace(), hex(code)


@pytest.mark.parametrize(("low", "high"), [(1, 100), (0, 30), (1, 1000), (1, 37), (5, 12345)])
def test_int_range_pattern(low: int, high: int) -> None:
    pattern = re.compile(shapes.int_range_pattern(low, high))
    for number in range(20_000):
        for text in (str(number), str(number).zfill(9), f"0{number}", f"+{number}", f" {number}"):
            expected = text.isdigit() and len(text) <= 9 and low <= number <= high
            assert bool(pattern.fullmatch(text)) == expected, text


@settings(max_examples=400, deadline=None)
@given(st.text(_HOST_CHARS, max_size=20))
def test_host_schema_matches_is_valid_host(host: str) -> None:
    assert _validator(shapes.HOST.schema).is_valid(host) == is_valid_host(host.strip())


@pytest.mark.parametrize(
    "host",
    [
        "db.example.com",
        "db.example.com.",
        " 10.0.0.1 ",
        "2001:db8::1",
        "::ffff:1.2.3.4",
        "a" * 63 + ".com",
        "1.2.3.04",
        "999.1.1.1",
        "example.123",
        "-bad.example",
        "a" * 64 + ".com",
        "fe80::1%eth0",
        "[::1]",
        "",
    ],
)
def test_host_schema_cases(host: str) -> None:
    assert _validator(shapes.HOST.schema).is_valid(host) == is_valid_host(host.strip())


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from(list("aZ9_- \t.é")), max_size=8))
def test_product_header_pattern_matches_the_rule(value: str) -> None:
    schema = openapi.product_header_parameter(required=True)["schema"]
    try:
        validate_product_header(value, required=True)
        accepted = True
    except ApiError:
        accepted = False
    assert _validator(schema).is_valid(value) == accepted


BASE = {
    "configName": "pg_main",
    "type": "POSTGRESQL",
    "host": "db.example.com",
    "port": 5432,
    "databaseName": "ledger",
    "userName": "reader",
    "password": "s3cret",
}


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"configName": "  padded_name \t"},
        {"type": " MYSQL ", "schema": "  "},
        {"type": "ORACLE", "schema": "HR", "metadata": {"serviceName": "XEPDB1"}},
        {"type": "MONGODB", "metadata": {"authSource": "admin", "team": 1.5}},
        {"ssl": {"mode": "verify-full", "ca": "-----BEGIN CERTIFICATE-----"}},
        {"ssl": {"mode": "", "cert": "-----BEGIN C", "key": "-----BEGIN K"}},
        {"ssl": {}},
        {"ssl": None, "schema": None, "metadata": None},
        {"databaseName": "my ledger"},
        {"password": " x "},
    ],
)
def test_create_schema_accepts_what_the_validator_accepts(overrides: dict[str, Any]) -> None:
    body = {**BASE, **overrides}
    assert _accepted(body)
    assert _create().is_valid(body)


@pytest.mark.parametrize(
    "overrides",
    [
        {"configName": "ab"},
        {"type": "postgresql"},
        {"type": "SQLITE", "databaseName": "/data/x.db"},
        {"type": "MYSQL", "schema": "public"},
        {"type": "ORACLE"},
        {"type": "ORACLE", "metadata": {"serviceName": "bad name"}},
        {"metadata": {"serviceName": 5}},
        {"metadata": {"nested": {"a": 1}}},
        {"metadata": {"": "x"}},
        {"metadata": {"k": "x" * 2001}},
        {"ssl": {"mode": "require", "cert": "-----BEGIN C"}},
        {"ssl": {"mode": "true"}},
        {"ssl": {"ca": "-----BEGIN C"}},
        {"ssl": {"mode": "require", "ca": "PEM"}},
        {"port": 0},
        {"port": True},
        {"port": "5432"},
        {"databaseName": "a/b"},
        {"databaseName": "a\tb"},
        {"userName": "  "},
        {"password": "   "},
        {"password": "x" * 1025},
        {"host": "localhost:5432"},
        {"extra": 1},
    ],
)
def test_create_schema_rejects_what_the_validator_rejects(overrides: dict[str, Any]) -> None:
    body = {**BASE, **overrides}
    assert not _accepted(body)
    assert not _create().is_valid(body)


def test_sqlite_branch_only_where_sqlite_is_accepted() -> None:
    body = {"configName": "local", "type": "SQLITE", "databaseName": "/data/x.db"}
    assert not _create().is_valid(body)
    assert _create(sqlite=True).is_valid(body)
    assert not _create(sqlite=True).is_valid({**body, "host": "db.example.com"})


def test_job_and_validate_schema_bodies() -> None:
    components = openapi.request_components(sqlite=False, max_limits=DEFAULT_LIMITS)
    job = _validator(components["JobRequest"])
    ok = {
        "dataRequest": {
            "mappedFields": {"pg": {"accounts": ["id"], "empty": []}},
            "filters": {"pg": {"accounts": {"id": {"between": [1, 2], "eq": [None, 3]}}}},
            "limits": {"maxConcurrency": 2},
        },
        "metadata": {"source": "payments", "n": 1},
    }
    assert job.is_valid(ok)
    broken: list[dict[str, Any]] = [
        {"dataRequest": {"mappedFields": {}}, "metadata": {"source": "p"}},
        {"dataRequest": {"mappedFields": {"pg": {"t": []}}}, "metadata": {"source": "p"}},
        {"dataRequest": {"mappedFields": {"pg": {"t": ["*", "id"]}}}, "metadata": {"source": "p"}},
        {"dataRequest": {"mappedFields": {" pg": {"t": ["id"]}}}, "metadata": {"source": "p"}},
        {"dataRequest": {"mappedFields": {"pg": {"t": ["id"]}}}, "metadata": {"source": " "}},
        {
            "dataRequest": {"mappedFields": {"pg": {"t": ["id"]}}, "limits": {"maxConcurrency": 5}},
            "metadata": {"source": "p"},
        },
        {
            "dataRequest": {
                "mappedFields": {"pg": {"t": ["id"]}},
                "filters": {"pg": {"t": {"id": {"gt": [None]}}}},
            },
            "metadata": {"source": "p"},
        },
    ]
    assert not any(job.is_valid(body) for body in broken)
    validate = _validator(components["ValidateSchemaRequest"])
    assert validate.is_valid({"mappedFields": {"pg": {"t": [], "u": ["*"]}}})
    assert not validate.is_valid({"mappedFields": {}})
    assert not validate.is_valid({"mappedFields": {"pg": {"t": ["a"] * 51}}})


async def test_served_document_fits_the_deployment(make_harness: HarnessFactory) -> None:
    h: Harness = await make_harness(env={"MAX_PAGINATION_LIMIT": "25"})
    document = (await h.client.get("/openapi.json")).json()
    listing = document["paths"][C]["get"]["parameters"]
    limit = next(p for p in listing if p["name"] == "limit")
    assert re.fullmatch(limit["schema"]["pattern"], "25")
    assert not re.fullmatch(limit["schema"]["pattern"], "26")
    assert re.fullmatch(limit["schema"]["pattern"], "")  # §2.6.2: empty means absent
    path_id = document["paths"][f"{C}/{{id}}"]["get"]["parameters"][0]
    assert not re.fullmatch(path_id["schema"]["pattern"], "0")
    create = document["components"]["schemas"]["ConnectionCreate"]
    assert all("SQLITE" not in branch["title"] for branch in create["anyOf"])
    body = document["paths"][C]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/ConnectionCreate"}


_FILTER_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.text(st.characters(blacklist_characters="\x00"), max_size=3),
    st.just("x" * 257),  # over the LIKE pattern bound
    st.just([1]),  # not a scalar
)


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([*(op.value for op in OPERATOR_ARITY), "foo"]),
        st.one_of(st.lists(_FILTER_VALUES, max_size=4), st.integers(0, 1)),
        max_size=3,
    )
)
def test_filter_operator_schema_matches_the_engine(condition: dict[str, Any]) -> None:
    """§3.4: the operators' JSON Schema (generated from the engine's OPERATOR_ARITY) accepts a
    field condition exactly when the engine's filter parser does."""
    components = openapi.request_components(sqlite=False, max_limits=DEFAULT_LIMITS)
    job = _validator(components["JobRequest"])
    mapped = {"pg": {"t": ["id"]}}
    filters = {"pg": {"t": {"id": condition}}}
    body = {
        "dataRequest": {"mappedFields": mapped, "filters": filters},
        "metadata": {"source": "p"},
    }
    try:
        parse_filters(filters, mapped)
        parsed = True
    except EngineError:
        parsed = False
    assert job.is_valid(body) == parsed, condition


@pytest.mark.parametrize("count", [1000, 1001])
def test_filter_operator_schema_list_cap(count: int) -> None:
    components = openapi.request_components(sqlite=False, max_limits=DEFAULT_LIMITS)
    job = _validator(components["JobRequest"])
    mapped = {"pg": {"t": ["id"]}}
    filters = {"pg": {"t": {"id": {"in": list(range(count))}}}}
    body = {
        "dataRequest": {"mappedFields": mapped, "filters": filters},
        "metadata": {"source": "p"},
    }
    assert job.is_valid(body) == (count <= 1000)
    with pytest.raises(EngineError) if count > 1000 else contextlib.nullcontext():
        parse_filters(filters, mapped)
