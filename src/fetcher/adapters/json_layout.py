"""JSON texts laid out as §5.4 bytes in C, without Python objects (issue 23; contract §5.3
JSON row, §5.4).

A source that prints each row (or value) as one compact JSON text, such as PostgreSQL's
``json_build_object(...)::text`` with numerics as text, timestamps already formatted and
``jsonb`` embedded as its own text, leaves only the layout to Fetcher: keys sorted by code
point at every level, 2-space indentation, strings re-escaped as §5.4 says, numbers kept as
received. :func:`layout_rows` does that in the C extension ``fetcher.adapters._json_layout``.

Equivalence (tested byte for byte, ``tests/unit/document/test_json_layout.py``): for every text
it accepts, the bytes equal what the engine's reference writer (``dumps_document``) writes for
the value that text parses to exactly (``parse_json_exact_fractions``, as the connectors parse
JSON columns: numbers keep their source text). It declines (``None``) everything else, and
declining is always correct: the caller then takes its Python path for those texts, which
writes them, or raises its own error (an invalid text, a value nested too deep).

Declined:

* the native module is not built (installed without a C compiler: every call declines);
* a text that is not exactly one valid JSON value (RFC 8259; trailing data, ``NaN``/
  ``Infinity``, a raw control character in a string, an unknown escape, a leading zero, an
  empty text, a text that is only whitespace);
* a text that is not strict UTF-8 (overlong forms, encoded surrogates, a byte-order mark, NUL;
  a ``str`` holding a lone surrogate);
* a ``\\u`` escape of a lone surrogate (a pair is decoded to its character, as the reference
  does);
* an object with the same key twice (the reference keeps the last one);
* a value nesting deeper than ``max_depth`` containers (default
  :data:`~fetcher.engine.errors.MAX_JSON_DEPTH`; ``[]`` nests 1, a scalar 0).

Keys compare by the bytes of their decoded UTF-8, which is code-point order: every valid key
compares exactly, so no key is declined for its content.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from fetcher.engine.kit import MAX_JSON_DEPTH

__all__ = ["NATIVE", "layout_rows", "layout_value", "stamp_text"]

_Texts = Sequence[bytes | bytearray | memoryview | str]

_native_layout: Callable[..., bytes | None] | None
try:
    from fetcher.adapters._json_layout import layout_rows as _native_layout
except ImportError:  # built without a C compiler (setup.py: optional): every call declines
    _native_layout = None

#: Whether the C extension is built; without it every call declines.
NATIVE: Final = _native_layout is not None


def layout_rows(
    texts: _Texts,
    depth: int,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    timestamps: Sequence[str] = (),
    zoned_timestamps: Sequence[str] = (),
) -> bytes | None:
    """The §5.4 UTF-8 text of the JSON values ``texts`` as array elements at ``depth``, as
    ``SelfEncodingRows.encoded_rows(depth)`` gives rows (``fetcher.engine.document``): each
    value starts at ``depth`` with no leading indentation, its closing bracket is indented to
    ``depth``, and values are joined by ``",\\n"`` plus ``2 * depth`` spaces (``b""`` for no
    texts). ``None`` declines the whole batch (see the module).

    Each text is ``bytes`` (or another bytes-like object) holding UTF-8, or ``str``, with
    exactly one JSON value and any JSON whitespace around and inside it. ``max_depth``: the
    deepest nesting accepted; whole-row texts (a row object around its columns' values) may
    pass ``MAX_JSON_DEPTH + 1`` to take every row whose columns are within the engine's bound.
    ``depth`` and ``max_depth`` are in ``0..2**20`` (``ValueError`` otherwise).

    ``timestamps`` and ``zoned_timestamps``: members of each text's outermost object whose
    string value is a PostgreSQL ``timestamp`` (``timestamptz``) text in a UTC, ISO-DateStyle
    session; each is written as :func:`stamp_text` gives it."""
    if _native_layout is None:
        return None
    if not timestamps and not zoned_timestamps:
        return _native_layout(texts, depth, max_depth)
    plain = tuple(key.encode() for key in timestamps)
    zoned = tuple(key.encode() for key in zoned_timestamps)
    return _native_layout(texts, depth, max_depth, plain, zoned)


_STAMP: Final = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?")


def stamp_text(text: str, *, zoned: bool) -> str:
    """A PostgreSQL timestamp (``zoned``: timestamptz) text of years 1..9999 as the UTC, ISO
    session prints it (``YYYY-MM-DD HH:MM:SS[.ffffff]``, plus ``+00`` when zoned) in §5.3's
    form, ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``; any other text (``infinity``, BC, five-digit
    years) as it is: the connector's ``_DateTimeText`` of the same text. :func:`layout_rows`
    writes its stamped members so."""
    body = text[:-3] if zoned and text.endswith("+00") else (None if zoned else text)
    if body is None or not _STAMP.fullmatch(body) or not body.isascii():
        return text
    return body[:10] + "T" + body[11:] + "Z"


def layout_value(
    text: bytes | bytearray | memoryview | str, depth: int, *, max_depth: int = MAX_JSON_DEPTH
) -> bytes | None:
    """One value's §5.4 text at ``depth`` (:func:`layout_rows` of one text), or ``None``."""
    return layout_rows((text,), depth, max_depth=max_depth)
