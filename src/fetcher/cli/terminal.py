"""Text from a server, made safe to print on a terminal.

Minimal version for the ``jobs-list`` branch: helper ``cli-edges`` owns this module (same name
and signature), and its version replaces this one at merge.
"""

from __future__ import annotations

import unicodedata

__all__ = ["printable"]

#: Control (Cc), format (Cf: bidi overrides, zero-width) and line/paragraph separators.
_ESCAPED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def printable(value: object) -> str:
    """``str(value)`` with every control, bidi or separator character written as an escape
    (``\\x1b``, ``\\u202e``), so a value can neither move the cursor, recolour the terminal nor
    reorder what follows it."""
    return "".join(_escape(ch) if unicodedata.category(ch) in _ESCAPED else ch for ch in str(value))


def _escape(ch: str) -> str:
    code = ord(ch)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )
