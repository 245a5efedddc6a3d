"""MongoDB rendering of bound filters (contract §3.4 "MongoDB mapping", §1.4, §2.9.1).

The result is a ``find`` filter document in which typed values are MongoDB Extended JSON v2
markers (§1.4): the connector turns them into BSON with ``bson.json_util``; the Engine never
imports ``bson``.

* Each field gives one document (several conditions on it are combined with ``$and``); the
  field documents are combined with ``$and``: ``{"$and": [doc, …]}``, or ``{}`` when there is
  no filter.
* Values: ``datetime``/``date`` → ``{"$date": "<RFC 3339 UTC>"}``; a 24-hex string on an
  ``objectId`` field → ``{"$oid": …}``; ``UUID`` → ``{"$binary": {"base64": …,
  "subType": "04"}}``; ``Decimal`` → ``{"$numberDecimal": …}``; everything else as given.
* ``ne``/``nin``/comparisons never match null or missing values, as in SQL (§3.4 "Nulls").
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import BoundCondition, BoundFieldFilter, Operator
from fetcher.engine.filters.parse import LikeTokenKind, like_tokens
from fetcher.engine.types import Column

__all__ = ["LIKE_REGEX_OPTIONS", "check_mongo_field", "like_to_regex", "render_mongo_filter"]

#: §3.4: MongoDB LIKE is case-insensitive, and ``.`` matches a newline as SQL ``%``/``_`` do.
LIKE_REGEX_OPTIONS = "is"

_REGEX_SPECIALS = frozenset("\\.^$|?*+()[]{}")
_OBJECT_ID = re.compile(r"[0-9a-fA-F]{24}")
_COMPARISONS = {Operator.GT: "$gt", Operator.GTE: "$gte", Operator.LT: "$lt", Operator.LTE: "$lte"}


def check_mongo_field(field: str) -> None:
    """§2.9.1, §3.2: a field starting with ``$`` or containing ``.`` cannot be addressed."""
    if field.startswith("$") or "." in field:
        raise EngineError(
            ErrorCategory.VALIDATION, f"field '{field}' is not addressable on MongoDB"
        )


def like_to_regex(pattern: str) -> str:
    """Translate a LIKE pattern to a regex (§3.4): ``%sal%`` → ``sal``, ``a.b`` → ``^a\\.b$``.

    Literals are escaped, ``%`` → ``.*``, ``_`` → ``.``; a leading ``%`` run drops ``^`` and a
    trailing one drops ``$`` (the runs themselves are then left out).
    """
    tokens = list(like_tokens(pattern))
    anchored_start = not tokens or tokens[0].kind is not LikeTokenKind.ANY_RUN
    anchored_end = not tokens or tokens[-1].kind is not LikeTokenKind.ANY_RUN
    while tokens and tokens[0].kind is LikeTokenKind.ANY_RUN:
        tokens.pop(0)
    while tokens and tokens[-1].kind is LikeTokenKind.ANY_RUN:
        tokens.pop()
    body: list[str] = []
    for token in tokens:
        if token.kind is LikeTokenKind.ANY_RUN:
            body.append(".*")
        elif token.kind is LikeTokenKind.ANY_ONE:
            body.append(".")
        else:
            body.append(("\\" + token.char) if token.char in _REGEX_SPECIALS else token.char)
    return ("^" if anchored_start else "") + "".join(body) + ("$" if anchored_end else "")


def _iso_utc(value: datetime) -> str:
    moment = value.astimezone(UTC) if value.tzinfo is not None else value
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond // 1000:03d}"
    return text + "Z"


def _mongo_value(column: Column, value: object) -> object:
    """One bound value as Extended JSON v2 (§1.4, §3.4 "Values on MongoDB fields")."""
    if isinstance(value, datetime):
        return {"$date": _iso_utc(value)}
    if isinstance(value, date):
        return {"$date": _iso_utc(datetime.combine(value, time()))}
    if isinstance(value, uuid.UUID):
        encoded = base64.b64encode(value.bytes).decode("ascii")
        return {"$binary": {"base64": encoded, "subType": "04"}}
    if isinstance(value, Decimal):
        return {"$numberDecimal": str(value)}
    if (
        isinstance(value, str)
        and column.native_type.lower() == "objectid"
        and _OBJECT_ID.fullmatch(value)
    ):
        return {"$oid": value.lower()}
    return value


def _list_predicate(op: Operator, values: list[object], has_null: bool) -> object:
    """``eq``/``in``/``ne``/``nin``: the null rules of §3.4 "Nulls" and "MongoDB mapping"."""
    if op is Operator.EQ and len(values) + has_null == 1:
        return values[0] if values else None
    if op in (Operator.EQ, Operator.IN):
        return {"$in": [*values, None] if has_null else values}
    if has_null and op is Operator.NE:
        return {"$nin": values, "$exists": True, "$ne": None}
    return {"$nin": [*values, None]}


def _condition_doc(column: Column, cond: BoundCondition) -> dict[str, object]:
    op = cond.op
    values = [_mongo_value(column, v) for v in cond.values if v is not None]
    predicate: object
    if op in _COMPARISONS:
        predicate = {_COMPARISONS[op]: values[0]}
    elif op is Operator.BETWEEN:
        predicate = {"$gte": values[0], "$lt" if cond.upper_exclusive else "$lte": values[1]}
    elif op is Operator.LIKE:
        predicate = {"$regex": like_to_regex(str(cond.values[0])), "$options": LIKE_REGEX_OPTIONS}
    else:
        predicate = _list_predicate(op, values, len(values) < len(cond.values))
    return {column.name: predicate}


def _field_doc(field_filter: BoundFieldFilter) -> dict[str, object]:
    check_mongo_field(field_filter.column.name)
    docs = [_condition_doc(field_filter.column, c) for c in field_filter.conditions]
    return docs[0] if len(docs) == 1 else {"$and": docs}


def render_mongo_filter(filters: Sequence[BoundFieldFilter]) -> dict[str, object]:
    """The ``find`` filter for one collection (§3.4 "MongoDB mapping")."""
    docs = [_field_doc(ff) for ff in filters if ff.conditions]
    return {"$and": docs} if docs else {}
