"""``TRACE_URL_TEMPLATE`` (contract §15.3): where the console links a job's ``traceId``.

The template is an absolute ``http://`` or ``https://`` URL with ``{traceId}`` exactly once and
no other brace, for example ``https://tempo.example/trace/{traceId}``. The console replaces the
placeholder with the job's trace ID (32 lowercase hex, so nothing to escape) and opens the link
in a new tab without a referrer. A URL with credentials is refused: the template is sent to
every console user (``/console/config.json``) and must not carry a secret.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

__all__ = ["PLACEHOLDER", "valid_trace_url_template"]

PLACEHOLDER: Final = "{traceId}"
_MAX_CHARS: Final = 2048
#: Printable ASCII without space; a URL with anything else is not what an operator meant.
_URL_CHARS: Final = re.compile(r"[\x21-\x7e]+")


def valid_trace_url_template(value: str) -> bool:
    """``value`` is a usable template (module docstring)."""
    if len(value) > _MAX_CHARS or not _URL_CHARS.fullmatch(value):
        return False
    if value.count(PLACEHOLDER) != 1:
        return False
    bare = value.replace(PLACEHOLDER, "0" * 32)
    if "{" in bare or "}" in bare:
        return False
    try:
        parts = urlsplit(bare)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    return parts.username is None and parts.password is None
