"""Typed errors of the Manager API client (CONTRACT §2.2, §2.3).

::

    FetcherError
    ├── ApiError                   a non-2xx answer with a §2.2 body: code, title, message, fields
    │   ├── BadRequestError        400 (FET-0001, FET-04xx, FET-10xx validation)
    │   ├── AuthenticationError    401 FET-0010, with ``www_authenticate``
    │   ├── PermissionDeniedError  403 FET-0011 (``missing_scope``) / FET-0012
    │   ├── NotFoundError          404 FET-1001 / FET-0005
    │   ├── ConflictError          409 FET-0004 / FET-1002 / FET-1015 / FET-1021
    │   ├── SchemaValidationError  422 FET-1060, with ``errors``
    │   ├── RateLimitError         429 FET-0006, with ``retry_after``
    │   └── ServerError            5xx (FET-0002, FET-0003, FET-1041, FET-1042)
    ├── TransportError             no answer (connect, read, TLS failure)
    ├── InvalidAnswerError         an answer over the client's size bound, or not the expected JSON
    └── WaitTimeoutError           wait() gave up before the job reached a terminal status

Other 4xx answers (405, 413, 415) are plain :class:`ApiError`. Match on ``code`` for the
precise case: it is the stable identifier.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ApiError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "FetcherError",
    "InvalidAnswerError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "SchemaValidationError",
    "ServerError",
    "TransportError",
    "WaitTimeoutError",
]


class FetcherError(Exception):
    """Base of every error the client raises."""


class TransportError(FetcherError):
    """The request got no HTTP answer."""


class InvalidAnswerError(FetcherError):
    """The server answered something the client will not use: a body larger than the
    client's ``max_answer_bytes`` (the read stops there), a success body that is not the
    route's JSON, or an event-feed page of the wrong shape. The message names the bound or
    the part, never the body."""


class WaitTimeoutError(FetcherError, TimeoutError):
    """The job did not reach ``completed`` or ``failed`` in time; ``last`` is its last state."""

    def __init__(self, job_id: str, last: Any) -> None:
        super().__init__(f"job {job_id} is still {last.get('status') if last else 'unknown'}")
        self.job_id = job_id
        self.last = last


class ApiError(FetcherError):
    """A §2.2 error answer."""

    def __init__(
        self,
        status: int,
        code: str,
        title: str,
        message: str,
        fields: dict[str, str] | None = None,
        *,
        errors: list[dict[str, Any]] | None = None,
        request_id: str | None = None,
        retry_after: int | None = None,
        www_authenticate: str | None = None,
    ) -> None:
        super().__init__(f"{status} {code} {title}: {message}")
        self.status = status
        self.code = code
        self.title = title
        self.message = message
        self.fields = dict(fields or {})
        self.errors = list(errors or [])
        self.request_id = request_id
        self.retry_after = retry_after
        self.www_authenticate = www_authenticate


class BadRequestError(ApiError):
    pass


class AuthenticationError(ApiError):
    """401 FET-0010 (§12.2): no bearer token, or one the Manager refused (bad signature,
    expired, wrong issuer or audience, unknown key). ``www_authenticate`` is the answer's
    challenge: ``Bearer realm="fetcher"``, plus ``, error="invalid_token"`` when a token was
    sent and refused."""


class PermissionDeniedError(ApiError):
    """403: FET-0011 the token lacks the route's scope (``missing_scope`` names it, §12.3),
    or FET-0012 a product-restricted token acting outside its products (§12.4)."""

    @property
    def missing_scope(self) -> str | None:
        """The scope a FET-0011 answer names (its message is exactly
        ``token lacks scope <scope>``); None for any other answer."""
        prefix = "token lacks scope "
        if self.code != "FET-0011" or not self.message.startswith(prefix):
            return None
        return self.message[len(prefix) :] or None


class NotFoundError(ApiError):
    pass


class ConflictError(ApiError):
    pass


class SchemaValidationError(ApiError):
    """422 FET-1060: ``errors`` lists the §2.6.9 entries."""


class RateLimitError(ApiError):
    """429 FET-0006: ``retry_after`` is the ``Retry-After`` header in seconds."""


class ServerError(ApiError):
    pass


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: SchemaValidationError,
    429: RateLimitError,
}


def error_from_response(status: int, body: Any, headers: dict[str, str] | None = None) -> ApiError:
    """The typed error for a non-2xx answer; a body that is not §2.2 still gives an ApiError."""
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    doc = body if isinstance(body, dict) else {}
    kind = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    retry = headers.get("retry-after", "")
    fields = doc.get("fields")
    errors = doc.get("errors")
    return kind(
        status,
        str(doc.get("code", f"HTTP-{status}")),
        str(doc.get("title", "")),
        str(doc.get("message", "")),
        fields if isinstance(fields, dict) else None,
        errors=errors if isinstance(errors, list) else None,
        request_id=headers.get("x-request-id"),
        retry_after=int(retry) if retry.isdigit() else None,
        www_authenticate=headers.get("www-authenticate"),
    )
