"""§3.8 request hash: canonical object, serialization rules and the test vector."""

from __future__ import annotations

import hashlib

import pytest

from fetcher.engine.limits import DEFAULT_LIMITS
from fetcher.manager.json_body import parse_json_object
from fetcher.services.jobs.request_hash import canonical_request, request_hash
from fetcher.services.jobs.validation import validate_job_request

VECTOR = "d8d0ea87a9bdf5eafa220046160870734af52bd1871419bafb93d677103e88af"


def _hash_of(body: bytes) -> str:
    return validate_job_request(parse_json_object(body), max_limits=DEFAULT_LIMITS).request_hash


def test_contract_vector() -> None:
    body = {
        "dataRequest": {"mappedFields": {"pg": {"accounts": ["id", "email"]}}},
        "metadata": {"source": "payments"},
    }
    assert request_hash(body) == VECTOR


def test_contract_vector_through_validation() -> None:
    body = (
        b'{"metadata":{"source":"payments"},'
        b'"dataRequest":{"mappedFields":{"pg":{"accounts":["id","email"]}}}}'
    )
    assert _hash_of(body) == VECTOR


def test_empty_filters_and_limits_are_left_out() -> None:
    body = (
        b'{"dataRequest":{"mappedFields":{"pg":{"accounts":["id","email"]}},'
        b'"filters":{},"limits":null},"metadata":{"source":"payments"}}'
    )
    assert _hash_of(body) == VECTOR


def test_key_order_and_whitespace_do_not_matter() -> None:
    a = (
        b'{"dataRequest":{"mappedFields":{"pg":{"t":["a"]},"my":{"u":["b"]}}},'
        b'"metadata":{"source":"s","x":1}}'
    )
    b = (
        b'{ "metadata" : {"x":1, "source":"s"}, '
        b'"dataRequest": {"mappedFields": {"my":{"u":["b"]}, "pg":{"t":["a"]}}} }'
    )
    assert _hash_of(a) == _hash_of(b)


def test_field_order_and_duplicates_matter() -> None:
    base = b'{"dataRequest":{"mappedFields":{"pg":{"t":[%s]}}},"metadata":{"source":"s"}}'
    hashes = {_hash_of(base % f) for f in (b'"a","b"', b'"b","a"', b'"a","b","b"')}
    assert len(hashes) == 3


def test_metadata_and_source_spelling_matter() -> None:
    base = b'{"dataRequest":{"mappedFields":{"pg":{"t":["a"]}}},"metadata":{"source":"%s"}}'
    assert _hash_of(base % b"payments") != _hash_of(base % b"Payments")


def test_limits_and_filters_are_part_of_the_hash() -> None:
    mapped = {"pg": {"accounts": ["id", "email"]}}
    metadata = {"source": "payments"}
    plain = request_hash(canonical_request(mapped, metadata))
    assert plain == VECTOR
    with_limits = request_hash(canonical_request(mapped, metadata, limits={"maxConcurrency": 1}))
    with_filters = request_hash(
        canonical_request(mapped, metadata, filters={"pg": {"accounts": {"id": {"eq": [1]}}}})
    )
    assert len({plain, with_limits, with_filters}) == 3


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (b"1.50", b"1.5", True),  # non-integers use the float repr
        (b"1.0", b"1", False),  # 1.0 stays 1.0; integers stay integers
        (b"1e2", b"100.0", True),
        (b"1e2", b"100", False),
        (b"-0.0", b"0.0", False),
        (b"10", b"10", True),
    ],
)
def test_number_rules(a: bytes, b: bytes, same: bool) -> None:
    base = b'{"dataRequest":{"mappedFields":{"pg":{"t":["a"]}}},"metadata":{"source":"s","n":%s}}'
    assert (_hash_of(base % a) == _hash_of(base % b)) is same


def test_serialization_is_exactly_the_contract_text() -> None:
    parts = {"dataRequest": {"mappedFields": {"p": {"t": ["é"]}}}, "metadata": {"n": 1.5, "i": 2}}
    text = '{"dataRequest":{"mappedFields":{"p":{"t":["é"]}}},"metadata":{"i":2,"n":1.5}}'
    assert request_hash(parts) == hashlib.sha256(text.encode("utf-8")).hexdigest()
