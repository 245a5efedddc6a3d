"""The engine's closed error taxonomy (contract §1.4, §4.5).

Every failure that crosses a port is an :class:`EngineError` with one :class:`ErrorCategory`.
Adapters translate driver exceptions into it at their edge; hosts map categories to HTTP codes
or job failure texts. ``message`` holds the fixed part of a failure text (names from the request
only); ``detail`` holds driver or library text, which hosts MUST redact before it leaves the
process (§8.7).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["EngineError", "ErrorCategory", "MAX_ERROR_TEXT"]

#: §4.5: the whole failure text is at most 2,000 code points.
MAX_ERROR_TEXT = 2000


class ErrorCategory(StrEnum):
    VALIDATION = "validation"
    NOT_FOUND = "not_found"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    LIMIT_EXCEEDED = "limit_exceeded"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    CONNECT = "connect"
    TIMEOUT = "timeout"
    CANCELED = "canceled"
    INTERNAL = "internal"


class EngineError(Exception):
    """An engine failure: ``str()`` is ``engine: [<category>] <message>``."""

    def __init__(self, category: ErrorCategory, message: str, *, detail: str | None = None) -> None:
        self.category = ErrorCategory(category)
        self.message = message
        self.detail = detail
        super().__init__(self.message)

    def text(self, redact: object = None) -> str:
        """The §4.5 failure text ``<fixed part>[: <detail>]``, cut to 2,000 code points.

        ``redact`` is an optional ``Callable[[str], str]`` applied to the detail only.
        """
        detail = self.detail
        if detail is not None and callable(redact):
            detail = str(redact(detail))
        text = self.message if not detail else f"{self.message}: {detail}"
        return truncate_error_text(text)

    def __str__(self) -> str:
        return f"engine: [{self.category.value}] {self.message}"

    def __repr__(self) -> str:
        return f"EngineError({self.category.value!r}, {self.message!r})"


def truncate_error_text(text: str) -> str:
    """§4.5: longer text is cut to its first 1,997 code points followed by ``...``."""
    if len(text) <= MAX_ERROR_TEXT:
        return text
    return text[: MAX_ERROR_TEXT - 3] + "..."
