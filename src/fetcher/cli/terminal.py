"""What the command line writes to a terminal from a server: one escaping rule for every value.

A server the user points the CLI at (a feed, a Manager, an object store) chooses the bytes of
every field the CLI prints. Written raw, an ESC sequence sets the window title, clears the
screen, prints a fake line or (OSC 52) writes the clipboard; a bidi override reorders what the
reader sees; a newline forges a whole output line; a lone surrogate makes the write itself
fail. So every server value passes through :func:`printable` (plain text) or
:func:`json_text` (JSON output), and nothing else writes one:

* C0 controls (U+0000–U+001F, newline and tab included), DEL and the C1 controls
  (U+0080–U+009F) are shown as ``\\xNN``;
* the bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), the line and
  paragraph separators (U+2028, U+2029) and lone surrogates are shown as ``\\uNNNN``;
* a backslash is doubled, so an escape the server wrote as text cannot pass for one of ours.

JSON output keeps its meaning: the same characters become JSON ``\\uNNNN`` escapes, which a
JSON reader decodes back to the original value.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["ERROR_TEXT_CHARS", "is_uuid", "json_document_text", "json_text", "printable"]

#: How much of a server's text an error line shows.
ERROR_TEXT_CHARS = 2000

#: The controls (C0, DEL, C1) and the other characters that change how a line reads: bidi
#: marks, embeddings, overrides and isolates, the line/paragraph separators, lone surrogates.
_DEL_AND_C1 = "\x7f-\x9f"
_REORDERING = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x1f{_DEL_AND_C1}{_REORDERING}]")
_UNSAFE_OR_BACKSLASH = re.compile(f"[\x00-\x1f{_DEL_AND_C1}{_REORDERING}\\\\]")
#: As :data:`_UNSAFE`, less the tab, newline and carriage return JSON allows between tokens.
_UNSAFE_IN_DOCUMENT = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f{_DEL_AND_C1}{_REORDERING}]")


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: object, *, max_chars: int | None = None) -> str:
    """``value`` as text safe to write on a terminal line (module docstring); with
    ``max_chars``, cut to that many characters of the escaped text plus a note of the rest
    (an error line stays one readable line whatever the server sent)."""
    text = value if isinstance(value, str) else str(value)
    shown = _UNSAFE_OR_BACKSLASH.sub(_visible, text)
    if max_chars is None or len(shown) <= max_chars:
        return shown
    return f"{shown[:max_chars]}… ({len(shown) - max_chars} more characters)"


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(value: Any) -> str:
    """``value`` as compact JSON that is safe on a terminal and decodes to the same value."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return _UNSAFE.sub(_json_escape, text)


def json_document_text(text: str) -> str:
    """A piece of a JSON document made safe for a terminal: each unsafe character becomes a
    JSON ``\\uNNNN`` escape (inside a string it decodes to the same value; valid JSON has
    none outside one), except the tab, newline and carriage return JSON allows between tokens
    (a string cannot hold them raw)."""
    return _UNSAFE_IN_DOCUMENT.sub(_json_escape, text)


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_uuid(value: object) -> bool:
    """True for a UUID in its canonical 8-4-4-4-12 hex form (any letter case): a job ID."""
    return isinstance(value, str) and _UUID.fullmatch(value) is not None
