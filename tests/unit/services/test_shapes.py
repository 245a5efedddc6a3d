"""Each field of ``fetcher.services.api.shapes`` is declared once: its JSON Schema accepts exactly
the
values its check accepts (checked with ``jsonschema_rs``, the validator schemathesis uses).

U+0000 is left out of the generated text: §2.1 refuses it while parsing the body, before any
field check runs, and every string schema refuses it (asserted separately).
"""

from __future__ import annotations

import ipaddress
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.services.api import shapes
from fetcher.services.api.shapes import Field, Invalid
from fetcher.services.connections import rules as connection_rules
from fetcher.services.errors import ApiError

#: Letters, digits, the separators the rules name, whitespace of several kinds, non-ASCII.
_CHARS = st.sampled_from([*"aZ9_-.$/?#;=:@ ", "\t", "\n", "\u2003", "\x85", "é", "\u3000"])

TEXT_FIELDS: dict[str, Field[Any]] = {
    "configName": shapes.CONFIG_NAME,
    "userName": shapes.USER_NAME,
    "password": shapes.PASSWORD,
    "databaseName": shapes.DATABASE_NAME,
    "schema": shapes.SCHEMA,
    "reserved": shapes.RESERVED_VALUE,
    "host": shapes.HOST,
    "source": shapes.SOURCE,
}


def _accepts(field: Field[Any], value: object) -> bool:
    try:
        field.check(value)
    except Invalid:
        return False
    return True


def _valid(field: Field[Any], value: object) -> bool:
    return bool(jsonschema_rs.Draft202012Validator(field.schema).is_valid(value))


def _texts(max_size: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(_CHARS, max_size=max_size),
        st.builds(
            lambda pad, core, end: pad + core + end,
            st.text(st.sampled_from(" \t"), max_size=2),
            st.text(st.sampled_from("ab9_-"), min_size=1, max_size=max_size),
            st.text(st.sampled_from(" \t"), max_size=2),
        ),
    )


@pytest.mark.parametrize("name", sorted(TEXT_FIELDS))
@settings(max_examples=300, deadline=None)
@given(value=_texts(12))
def test_schema_accepts_what_the_check_accepts(name: str, value: str) -> None:
    field = TEXT_FIELDS[name]
    assert _valid(field, value) == _accepts(field, value), repr(value)


@pytest.mark.parametrize(
    ("name", "limit"),
    [("configName", 100), ("userName", 128), ("password", 1024), ("databaseName", 255)],
)
def test_length_limits_agree(name: str, limit: int) -> None:
    field = TEXT_FIELDS[name]
    for value in ("a" * limit, "a" * (limit + 1), " " + "a" * limit + " "):
        assert _valid(field, value) == _accepts(field, value), (name, len(value))


@pytest.mark.parametrize("name", sorted(TEXT_FIELDS))
def test_every_string_schema_refuses_nul(name: str) -> None:
    assert not _valid(TEXT_FIELDS[name], "ab\x00cd")


@pytest.mark.parametrize("value", [0, 1, 5432, 65535, 65536, -1, True, False, None, "5432"])
def test_port(value: object) -> None:
    assert _valid(shapes.PORT, value) == _accepts(shapes.PORT, value)


@pytest.mark.parametrize("value", ["-----BEGIN C", "-----BEGIN", " -----BEGIN C", "PEM", 5])
def test_pem_text(value: object) -> None:
    field = shapes.pem("ca")
    assert _valid(field, value) == _accepts(field, value)


def test_pem_absent_values_are_none() -> None:
    assert shapes.pem("key").check(None) is None
    assert shapes.pem("key").check("") is None


def test_required_fields_follow_the_table() -> None:
    assert connection_rules.required_fields("POSTGRESQL") == [
        "configName",
        "type",
        "host",
        "port",
        "databaseName",
        "userName",
        "password",
    ]
    assert connection_rules.required_fields("SQLITE") == ["configName", "type", "databaseName"]
    assert connection_rules.required_fields("MONGODB") == [
        "configName",
        "type",
        "host",
        "port",
        "databaseName",
    ]
    assert connection_rules.required_fields(None) == connection_rules.required_fields("ORACLE")


def test_connection_types_come_from_the_literal() -> None:
    assert shapes.CONNECTION_TYPES == (
        "POSTGRESQL",
        "MYSQL",
        "SQL_SERVER",
        "ORACLE",
        "MONGODB",
        "SQLITE",
    )
    assert tuple(shapes.TYPES) == shapes.CONNECTION_TYPES  # one rules row per type, in order
    assert set(shapes.SSL_MODES) == set(shapes.CONNECTION_TYPES) - {shapes.SQLITE}


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from([*"ab,, ", "\t", "\u3000"]), max_size=45))
def test_schemas_parameter_schema_matches_its_parser(value: str) -> None:
    assert _valid(shapes.SCHEMAS_PARAM, value) == _accepts(shapes.SCHEMAS_PARAM, value), value


@pytest.mark.parametrize("count", [1, 20, 21])
def test_schemas_parameter_count(count: int) -> None:
    value = ",".join(["s"] * count)
    assert _valid(shapes.SCHEMAS_PARAM, value) == _accepts(shapes.SCHEMAS_PARAM, value)
    assert _accepts(shapes.SCHEMAS_PARAM, value) == (count <= 20)


# --- query parameters (§2.6.2, §2.12) ------------------------------------------------------

#: MAX_PAGINATION_LIMIT 37 (a limit pattern of two widths); every list and feed parameter.
QUERY_PARAMS = [*shapes.list_params(37), *shapes.FEED_PARAMS]
_DIGITS = st.text(st.sampled_from("0123456789"), min_size=1, max_size=4)
_QUERY_TEXT = st.one_of(
    st.text(st.sampled_from([*"0123456789-+ .aAsScCdDeEfl", "\u0663", "\uff11"]), max_size=12),
    st.text(st.sampled_from("0123456789"), max_size=20),
    st.builds(lambda n, zeros: "0" * zeros + str(n), st.integers(-1, 1100), st.integers(0, 8)),
    st.tuples(_DIGITS, _DIGITS, _DIGITS).map("-".join),  # near YYYY-MM-DD
    st.dates().map(lambda day: day.isoformat()),
    st.sampled_from(["0000-01-01", "0000-12-31", "0001-01-01", "0010-01-01", "9999-12-31"]),
    st.sampled_from(shapes.SORT_ORDERS).flatmap(
        lambda word: st.tuples(*[st.sampled_from([c, c.upper()]) for c in word]).map("".join)
    ),
    st.sampled_from([*shapes.EVENT_TYPES, "Completed", "failed ", ""]),
)


def _reads(param: shapes.QueryParam[Any], raw: str) -> bool:
    try:
        param.read({param.name: raw})
    except ApiError:
        return False
    return True


@pytest.mark.parametrize("param", QUERY_PARAMS, ids=lambda p: f"{p.name}-{p.empty_absent}")
@settings(max_examples=300, deadline=None)
@given(raw=_QUERY_TEXT)
def test_query_parameter_schema_matches_its_parser(param: shapes.QueryParam[Any], raw: str) -> None:
    validator = jsonschema_rs.Draft202012Validator(param.schema, validate_formats=True)
    assert validator.is_valid(raw) == _reads(param, raw), raw


#: Each bound of the integer parameters, on both sides, with and without leading zeros.
_BOUNDS = ["-1", "0", "1", "10", "30", "31", "37", "38", "100", "101", "1000", "1001"]


@pytest.mark.parametrize("param", QUERY_PARAMS, ids=lambda p: f"{p.name}-{p.empty_absent}")
def test_query_parameter_bounds(param: shapes.QueryParam[Any]) -> None:
    validator = jsonschema_rs.Draft202012Validator(param.schema, validate_formats=True)
    for raw in [*_BOUNDS, *(b.zfill(9) for b in _BOUNDS), "999999999", "0000000001"]:
        assert validator.is_valid(raw) == _reads(param, raw), raw


def test_query_parameters_absent_and_empty() -> None:
    assert shapes.list_limit(37).read({}) == 10
    assert shapes.list_limit(37).read({"limit": ""}) == 10  # §2.6.2: empty means absent
    with pytest.raises(ApiError) as over:  # the default is checked against the maximum too
        shapes.list_limit(5).read({})
    assert over.value.code == "FET-0406"
    assert [p.read({}) for p in shapes.FEED_PARAMS] == [None, 100, None, 0]
    for param in shapes.FEED_PARAMS:  # §2.12: an empty value is malformed
        with pytest.raises(ApiError) as empty:
            param.read({param.name: ""})
        assert empty.value.code == "FET-0405"


@settings(max_examples=300, deadline=None)
@given(_texts(6))
def test_name_rule_matches_the_tree_schema(name: str) -> None:
    """§3.2: a datasource, table or field name passes the validators' rule exactly when the
    mappedFields schema's name pattern accepts it."""
    pattern = shapes.mapped_fields_schema(1, 1, 1, job=False)["propertyNames"]["pattern"]
    schema = {"type": "string", "pattern": pattern}
    assert jsonschema_rs.Draft202012Validator(schema).is_valid(name) == (
        shapes.name_problem(name) is None
    ), repr(name)


# --- the host grammar against ipaddress -------------------------------------------------------
# is_valid_host reads HOST_FORMS, the same patterns the schema publishes; the standard library's
# parsers are the independent oracle for the literal forms.


def _parses(kind: type[ipaddress.IPv4Address | ipaddress.IPv6Address], text: str) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


_V6_TEXTS = st.one_of(
    st.ip_addresses(v=6).map(str),
    st.ip_addresses(v=6).map(lambda a: a.exploded),
    st.builds(lambda a, b: f"{a}:{b}", st.ip_addresses(v=6).map(str), st.ip_addresses(v=4)),
    st.text(st.sampled_from([*"0123456789abcdefABCDEFg:.%"]), max_size=45),
)


@settings(max_examples=2000, deadline=None)
@given(_V6_TEXTS)
def test_ipv6_form_is_what_ipaddress_parses(text: str) -> None:
    if ":" in text:
        assert shapes.is_valid_host(text) == (
            "%" not in text and _parses(ipaddress.IPv6Address, text)
        )


_OCTETS = ["0", "00", "01", "1", "9", "10", "99", "100", "199", "200", "249", "250", "255", "256"]


@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(
        st.ip_addresses(v=4).map(str),
        st.text(st.sampled_from([*"0123456789."]), max_size=20),
        st.lists(st.sampled_from(_OCTETS), min_size=3, max_size=5).map(".".join),
    )
)
def test_digits_and_dots_are_exactly_ipv4_literals(text: str) -> None:
    """A name whose last label is all digits is refused, so such text is a host only as IPv4."""
    assert shapes.is_valid_host(text) == _parses(ipaddress.IPv4Address, text)
