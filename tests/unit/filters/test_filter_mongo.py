"""MongoDB rendering (contract §3.4 "MongoDB mapping", §1.4 Extended JSON, §2.9.1)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import (
    BoundCondition,
    BoundFieldFilter,
    Condition,
    FieldFilter,
    Operator,
)
from fetcher.engine.filters.bind import bind_field_filter
from fetcher.engine.filters.mongo import check_mongo_field, like_to_regex, render_mongo_filter
from fetcher.engine.types import Column, TypeFamily

S = Column("s", TypeFamily.TEXT, "string")
OID = Column("_id", TypeFamily.TEXT, "objectId")
WHEN = Column("when", TypeFamily.TIMESTAMPTZ, "date")
UID = Column("u", TypeFamily.UUID, "binData")
N = Column("n", TypeFamily.INTEGER, "int32")


def ff(column: Column, op: Operator, *values: object, exclusive: bool = False) -> BoundFieldFilter:
    return BoundFieldFilter(column, (BoundCondition(op, values, exclusive),))


def doc(column: Column, op: Operator, *values: object) -> object:
    rendered = render_mongo_filter([ff(column, op, *values)])
    assert list(rendered) == ["$and"]
    docs = rendered["$and"]
    assert isinstance(docs, list)
    assert len(docs) == 1
    return docs[0]


@pytest.mark.parametrize(
    ("op", "values", "expected"),
    [
        (Operator.EQ, ("a",), {"s": "a"}),
        (Operator.EQ, (None,), {"s": None}),
        (Operator.EQ, ("a", "b"), {"s": {"$in": ["a", "b"]}}),
        (Operator.EQ, ("a", None), {"s": {"$in": ["a", None]}}),
        (Operator.NE, ("a",), {"s": {"$nin": ["a", None]}}),
        (Operator.NE, ("a", "b"), {"s": {"$nin": ["a", "b", None]}}),
        (Operator.NE, ("a", None), {"s": {"$nin": ["a"], "$exists": True, "$ne": None}}),
        (Operator.NE, (None,), {"s": {"$nin": [], "$exists": True, "$ne": None}}),
        (Operator.GT, ("a",), {"s": {"$gt": "a"}}),
        (Operator.GTE, ("a",), {"s": {"$gte": "a"}}),
        (Operator.LT, ("a",), {"s": {"$lt": "a"}}),
        (Operator.LTE, ("a",), {"s": {"$lte": "a"}}),
        (Operator.BETWEEN, ("a", "b"), {"s": {"$gte": "a", "$lte": "b"}}),
        (Operator.IN, ("a",), {"s": {"$in": ["a"]}}),
        (Operator.IN, ("a", None), {"s": {"$in": ["a", None]}}),
        (Operator.IN, (None,), {"s": {"$in": [None]}}),
        (Operator.NIN, ("a", "b"), {"s": {"$nin": ["a", "b", None]}}),
        (Operator.NIN, ("a", None), {"s": {"$nin": ["a", None]}}),
        (Operator.NIN, (None,), {"s": {"$nin": [None]}}),
        (Operator.LIKE, ("%sal%",), {"s": {"$regex": "sal", "$options": "is"}}),
    ],
)
def test_every_operator(op: Operator, values: tuple[object, ...], expected: object) -> None:
    assert doc(S, op, *values) == expected


def test_no_filters() -> None:
    assert render_mongo_filter([]) == {}


def test_fields_and_conditions_are_combined_with_and() -> None:
    filters = [
        BoundFieldFilter(N, (BoundCondition(Operator.GT, (1,)), BoundCondition(Operator.GT, (2,)))),
        ff(S, Operator.EQ, "x"),
    ]
    assert render_mongo_filter(filters) == {
        "$and": [{"$and": [{"n": {"$gt": 1}}, {"n": {"$gt": 2}}]}, {"s": "x"}]
    }


def test_between_end_of_day_on_date_fields() -> None:
    bound = bind_field_filter(
        "m",
        "tx",
        WHEN,
        FieldFilter("when", (Condition(Operator.BETWEEN, ("2026-01-01", "2026-01-31")),)),
    )
    assert render_mongo_filter([bound]) == {
        "$and": [
            {
                "when": {
                    "$gte": {"$date": "2026-01-01T00:00:00Z"},
                    "$lt": {"$date": "2026-02-01T00:00:00Z"},
                }
            }
        ]
    }


def test_extended_json_markers() -> None:
    u = uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    assert doc(UID, Operator.EQ, u) == {
        "u": {"$binary": {"base64": "oO68mZwLTvi7bWu5vTgKEQ==", "subType": "04"}}
    }
    assert doc(OID, Operator.EQ, "507F1F77BCF86CD799439011") == {
        "_id": {"$oid": "507f1f77bcf86cd799439011"}
    }
    assert doc(OID, Operator.IN, "507f1f77bcf86cd799439011", "not-an-id", None) == {
        "_id": {"$in": [{"$oid": "507f1f77bcf86cd799439011"}, "not-an-id", None]}
    }
    assert doc(S, Operator.EQ, "507f1f77bcf86cd799439011") == {"s": "507f1f77bcf86cd799439011"}
    moment = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    assert doc(WHEN, Operator.GT, moment) == {
        "when": {"$gt": {"$date": "2026-01-02T03:04:05.678Z"}}
    }
    assert doc(WHEN, Operator.GT, datetime(2026, 1, 2)) == {
        "when": {"$gt": {"$date": "2026-01-02T00:00:00Z"}}
    }
    assert doc(WHEN, Operator.GT, date(2026, 1, 2)) == {
        "when": {"$gt": {"$date": "2026-01-02T00:00:00Z"}}
    }
    assert doc(N, Operator.LT, Decimal("1.5")) == {"n": {"$lt": {"$numberDecimal": "1.5"}}}
    assert doc(N, Operator.LT, 3) == {"n": {"$lt": 3}}


def test_bound_values_render_as_json() -> None:
    filters = [
        bind_field_filter(
            "m",
            "tx",
            UID,
            FieldFilter(
                "u", (Condition(Operator.NE, ("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", None)),)
            ),
        ),
        bind_field_filter(
            "m",
            "tx",
            WHEN,
            FieldFilter("when", (Condition(Operator.GTE, ("2026-01-01T02:00:00+02:00",)),)),
        ),
    ]
    text = json.dumps(render_mongo_filter(filters), sort_keys=True)
    assert json.loads(text) == {
        "$and": [
            {
                "u": {
                    "$nin": [{"$binary": {"base64": "oO68mZwLTvi7bWu5vTgKEQ==", "subType": "04"}}],
                    "$exists": True,
                    "$ne": None,
                }
            },
            {"when": {"$gte": {"$date": "2026-01-01T00:00:00Z"}}},
        ]
    }


@pytest.mark.parametrize(
    ("pattern", "regex"),
    [
        ("%sal%", "sal"),
        ("sal%", "^sal"),
        ("%sal", "sal$"),
        ("a.b", "^a\\.b$"),
        ("a_b", "^a.b$"),
        ("a%b", "^a.*b$"),
        ("%%x%%", "x"),
        ("%", ""),
        ("", "^$"),
        ("\\%", "^%$"),
        ("50\\%%", "^50%"),
        ("\\_x", "^_x$"),
        ("\\\\", "^\\\\$"),
        ("x\\", "^x\\\\$"),
        ("(a|b)*+?[c]{2}^$", "^\\(a\\|b\\)\\*\\+\\?\\[c\\]\\{2\\}\\^\\$$"),
        ("naïve ☃", "^naïve ☃$"),
    ],
)
def test_like_to_regex(pattern: str, regex: str) -> None:
    assert like_to_regex(pattern) == regex


@pytest.mark.parametrize(
    ("pattern", "subject", "matches"),
    [
        ("%sal%", "Big SALE", True),
        ("sal%", "a sal", False),
        ("a.b", "axb", False),
        ("a.b", "A.B", True),
        ("a_b", "a\nb", True),
        ("a%b", "a\n\nb", True),
        ("100\\%", "100%", True),
        ("100\\%", "1000", False),
    ],
)
def test_like_regex_semantics(pattern: str, subject: str, matches: bool) -> None:
    compiled = re.compile(like_to_regex(pattern), re.IGNORECASE | re.DOTALL)
    assert (compiled.search(subject) is not None) is matches


@pytest.mark.parametrize("field", ["$where", "$", "a.b", ".", "x."])
def test_unaddressable_fields(field: str) -> None:
    with pytest.raises(EngineError) as info:
        check_mongo_field(field)
    assert info.value.category is ErrorCategory.VALIDATION
    assert info.value.message == f"field '{field}' is not addressable on MongoDB"
    with pytest.raises(EngineError, match="is not addressable on MongoDB"):
        render_mongo_filter([ff(Column(field, TypeFamily.TEXT), Operator.EQ, 1)])


@pytest.mark.parametrize("field", ["_id", "a$", "name", "ä"])
def test_addressable_fields(field: str) -> None:
    check_mongo_field(field)
