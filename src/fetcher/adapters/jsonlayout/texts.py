"""JSON texts laid out as §5.4 bytes in C, without Python objects (issue 23; contract §5.3
JSON row, §5.4).

A JSON column's text (PostgreSQL ``json``/``jsonb``, MySQL ``JSON``) needs only layout to be
written: keys sorted by code point at every level, 2-space indentation, strings re-escaped as
§5.4 says, numbers kept as received. :func:`layout_rows` does that in the C extension
``fetcher.adapters.jsonlayout._native``, which also lays out whole driver rows
(:mod:`~fetcher.adapters.jsonlayout.columns`).

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
* a bytes-like text that is not one contiguous run of bytes (a strided ``memoryview``);
* a ``texts`` list that changes length during the call (a ``__buffer__`` that empties it, or a
  ``__del__`` run by a collection: Python code can run inside the call, issue 39).

Keys compare by the bytes of their decoded UTF-8, which is code-point order: every valid key
compares exactly, so no key is declined for its content.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from fetcher.engine.kit import MAX_JSON_DEPTH

__all__ = ["NATIVE", "layout_rows", "layout_value"]

_Texts = Sequence[bytes | bytearray | memoryview | str]

_native_layout: Callable[..., bytes | None] | None
try:
    from fetcher.adapters.jsonlayout._native import layout_rows as _native_layout
except ImportError:  # built without a C compiler (setup.py: optional): every call declines
    _native_layout = None

#: Whether the C extension is built; without it every call declines.
NATIVE: Final = _native_layout is not None


def layout_rows(
    texts: _Texts,
    depth: int,
    *,
    max_depth: int = MAX_JSON_DEPTH,
) -> bytes | None:
    """The §5.4 UTF-8 text of the JSON values ``texts`` as array elements at ``depth``, as
    ``SelfEncodingRows.encoded_rows(depth)`` gives rows (``fetcher.engine.document``): each
    value starts at ``depth`` with no leading indentation, its closing bracket is indented to
    ``depth``, and values are joined by ``",\\n"`` plus ``2 * depth`` spaces (``b""`` for no
    texts). ``None`` declines the whole batch (see the module).

    Each text is ``bytes`` (or another bytes-like object) holding UTF-8, or ``str``, with
    exactly one JSON value and any JSON whitespace around and inside it. ``max_depth``: the
    deepest nesting accepted. ``depth`` and ``max_depth`` are in ``0..2**20`` (``ValueError``
    otherwise)."""
    if _native_layout is None:
        return None
    return _native_layout(texts, depth, max_depth)


def layout_value(
    text: bytes | bytearray | memoryview | str, depth: int, *, max_depth: int = MAX_JSON_DEPTH
) -> bytes | None:
    """One value's §5.4 text at ``depth`` (:func:`layout_rows` of one text), or ``None``."""
    return layout_rows((text,), depth, max_depth=max_depth)
