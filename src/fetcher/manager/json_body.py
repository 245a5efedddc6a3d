"""Strict request-body decoding, media types and request IDs (contract §2.1).

``parse_json_object`` accepts exactly the JSON that §2.1 allows: UTF-8 text holding one object,
with no ``NaN``/``Infinity`` literals, no string (key or value) containing U+0000 or an unpaired
surrogate, no number that overflows a float and no integer literal of more than 19 digits. A
duplicated key keeps its last value. Everything else is ``400 FET-0001`` ``Invalid payload``.
"""

from __future__ import annotations

import json
import math
import re
import uuid

from fetcher.services.errors import EMPTY_BODY_MESSAGE, ApiError, invalid_payload

__all__ = [
    "EMPTY_BODY",
    "NOT_AN_OBJECT",
    "UNPARSABLE",
    "check_media_type",
    "parse_json_object",
    "request_id_from",
]

#: §2.1 messages (the first two are exact).
EMPTY_BODY = EMPTY_BODY_MESSAGE
UNPARSABLE = "unable to parse request body"
NOT_AN_OBJECT = "request body must be a JSON object"

#: §2.1: integer literals are limited to 19 digits (sign excluded).
_MAX_INT_DIGITS = 19
#: ``application/json`` or ``application/<subtype>+json``, compared lower-case.
_JSON_MEDIA_TYPE = re.compile(r"application/(?:json|[a-z0-9!#$&^_.+-]+\+json)")
#: §2.1 request IDs: 1-128 visible ASCII characters.
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")
#: U+0000 or any surrogate code point (a decoded string only holds unpaired ones).
_HOSTILE_CHAR = re.compile(r"[\x00\ud800-\udfff]")


class _Hostile(ValueError):
    """A §2.1 hostile value met while decoding."""


def _reject_constant(_: str) -> object:
    raise _Hostile("NaN and Infinity are not JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Hostile("number overflows a float")
    return value


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise _Hostile("integer literal too long")
    return int(text)


def _has_hostile_string(value: object) -> bool:
    """True when any string (key or value) in ``value`` holds U+0000 or a lone surrogate."""
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _HOSTILE_CHAR.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_json_object(body: bytes) -> dict[str, object]:
    """Decode a request body that must be a JSON object (§2.1).

    Raises ``ApiError`` FET-0001 ``Invalid payload`` with ``empty request body`` (no bytes, or
    whitespace only), ``unable to parse request body`` (invalid UTF-8 or JSON, or a hostile
    value) or ``request body must be a JSON object``.
    """
    if not body.strip():
        raise invalid_payload(EMPTY_BODY)
    try:
        text = body.decode("utf-8")
        value: object = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeError included
        raise invalid_payload(UNPARSABLE) from exc
    if _has_hostile_string(value):
        raise invalid_payload(UNPARSABLE)
    if not isinstance(value, dict):
        raise invalid_payload(NOT_AN_OBJECT)
    return value


def check_media_type(content_type: str | None) -> None:
    """§2.1: accept only ``application/json`` or ``application/*+json``.

    The media type is compared case-insensitively, and parameters (``charset=utf-8``) are
    allowed. An absent or blank ``Content-Type`` and any other type → ``415 FET-0009``: a
    browser sends a cross-site ``fetch`` with a Blob body and no ``Content-Type`` without a
    CORS preflight, so accepting none would let any web page create jobs and connections
    (§13 "Cross-site requests").
    """
    essence = (content_type or "").split(";", 1)[0].strip().lower()
    if _JSON_MEDIA_TYPE.fullmatch(essence) is None:
        raise ApiError(
            "FET-0009",
            "Content-Type must be application/json or application/*+json",
        )


def request_id_from(header: str | None) -> str:
    """§2.1: reuse an ``X-Request-Id`` of 1-128 visible ASCII characters, else a new UUIDv4."""
    if header is not None and _REQUEST_ID.fullmatch(header):
        return header
    return str(uuid.uuid4())
