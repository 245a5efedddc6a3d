"""Compact JSON text, the one serialization of stored and published documents.

No spaces after separators, non-ASCII characters as they are (UTF-8 on the wire), and no
``NaN``/``Infinity`` (they are not JSON, §2.1). ``sort_keys`` gives the §3.8 canonical form.
"""

from __future__ import annotations

import json

__all__ = ["compact_json"]


def compact_json(value: object, *, sort_keys: bool = False) -> str:
    """``value`` as compact JSON text; raises ``ValueError`` on a non-finite float."""
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=sort_keys
    )
