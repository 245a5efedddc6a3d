"""The one error type that use cases raise toward a host (contract §2.2, §2.3).

An :class:`ApiError` names a FET code, a human message and, for field-level validation errors,
the ``fields`` map of §2.2. The HTTP status and the default title of each code live in one table
in ``fetcher.manager.errors``; a use case sets ``title`` only where §2.3 gives a code several
titles (``Invalid payload``, ``Invalid Filter References``, ``Missing Required Field``, …).

Services never import the manager, so the fixed message texts that use cases need are here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "BAD_REQUEST_MESSAGE",
    "EMPTY_BODY_MESSAGE",
    "FORBIDDEN_HOST_MESSAGE",
    "MISSING_FIELDS_MESSAGE",
    "UNEXPECTED_FIELDS_MESSAGE",
    "ApiError",
    "Title",
    "bad_request",
    "forbidden_host",
    "invalid_data_request",
    "invalid_filter_references",
    "invalid_header",
    "invalid_payload",
    "missing_fields",
    "unexpected_fields",
]


class Title:
    """§2.3 titles that a use case selects explicitly (codes with more than one title)."""

    BAD_REQUEST = "Bad Request"
    INVALID_PAYLOAD = "Invalid payload"
    INVALID_DATA_REQUEST = "Invalid Data Request"
    INVALID_FILTER_REFERENCES = "Invalid Filter References"
    MISSING_FIELDS = "Missing Fields in Request"
    MISSING_REQUIRED_FIELD = "Missing Required Field"
    INVALID_FIELD_VALUE = "Invalid Field Value"
    NO_CONNECTIONS_FOUND = "No Connections Found"
    MISSING_DATA_SOURCE = "Missing Data Source"


#: §2.3 FET-0001 ``Bad Request`` message (field-level invalid values).
BAD_REQUEST_MESSAGE = (
    "The server could not understand the request due to malformed syntax. "
    "Please check the listed fields and try again."
)
#: §2.1, §2.6.5: the exact message for an empty body (PATCH ``{}`` included).
EMPTY_BODY_MESSAGE = "empty request body"
#: §2.5 the standard missing-fields message (exact).
MISSING_FIELDS_MESSAGE = (
    "Your request is missing one or more required fields. Please refer to the documentation "
    "to ensure all necessary fields are included in your request."
)
#: FET-0400 message (informative; the ``fields`` map names each unexpected path).
UNEXPECTED_FIELDS_MESSAGE = (
    "The request body contains more fields than expected. Please send only the allowed fields "
    "as per the documentation. The unexpected fields are listed in the fields object."
)
#: §2.3 FET-0414 message (exact). It never names the host or the range (§2.9).
FORBIDDEN_HOST_MESSAGE = "Host is not a valid external database endpoint"


class ApiError(Exception):
    """A contract error: FET ``code``, ``message``, optional ``fields`` and explicit ``title``.

    ``errors`` carries the list body member of FET-1060 (§2.6.9) and ``headers`` any response
    header a code requires (``Retry-After`` for FET-0006, §2.6.7). Both are optional.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        fields: Mapping[str, str] | None = None,
        title: str | None = None,
        errors: Sequence[Mapping[str, str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fields: dict[str, str] | None = dict(fields) if fields else None
        self.title = title
        self.errors: list[dict[str, str]] | None = (
            [dict(e) for e in errors] if errors is not None else None
        )
        self.headers: dict[str, str] = dict(headers) if headers else {}

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"ApiError({self.code!r}, {self.message!r}, fields={self.fields!r})"


def invalid_payload(message: str) -> ApiError:
    """§2.1: FET-0001 ``Invalid payload`` (unparsable, empty, or not a JSON object)."""
    return ApiError("FET-0001", message, title=Title.INVALID_PAYLOAD)


def bad_request(fields: Mapping[str, str]) -> ApiError:
    """§2.3: FET-0001 ``Bad Request`` listing every invalid field."""
    return ApiError("FET-0001", BAD_REQUEST_MESSAGE, fields=fields, title=Title.BAD_REQUEST)


def unexpected_fields(paths: Iterable[str]) -> ApiError:
    """§2.1: FET-0400 with ``fields`` mapping each JSON path to ``unexpected field``."""
    return ApiError(
        "FET-0400", UNEXPECTED_FIELDS_MESSAGE, fields=dict.fromkeys(paths, "unexpected field")
    )


def missing_fields(paths: Iterable[str]) -> ApiError:
    """§2.5: FET-0402 ``Missing Fields in Request``, each path as ``<path> is a required field``."""
    return ApiError(
        "FET-0402",
        MISSING_FIELDS_MESSAGE,
        fields={p: f"{p} is a required field" for p in paths},
        title=Title.MISSING_FIELDS,
    )


#: §2.6.5 step 7a: the ``fields`` message of a re-targeting PATCH without the password (exact).
RETARGET_PASSWORD_MESSAGE = "password is required when host, port, type or ssl change"  # noqa: S105


def retarget_needs_password() -> ApiError:
    """§2.6.5 step 7a (§13 "Credential re-targeting"): FET-0402 on ``password``."""
    return ApiError(
        "FET-0402",
        MISSING_FIELDS_MESSAGE,
        fields={"password": RETARGET_PASSWORD_MESSAGE},
        title=Title.MISSING_FIELDS,
    )


def invalid_data_request(message: str) -> ApiError:
    """§3.6: FET-0401 ``Invalid Data Request``."""
    return ApiError("FET-0401", message, title=Title.INVALID_DATA_REQUEST)


def invalid_filter_references(message: str) -> ApiError:
    """§3.4: FET-0401 ``Invalid Filter References`` (filter datasource not in mappedFields)."""
    return ApiError("FET-0401", message, title=Title.INVALID_FILTER_REFERENCES)


def invalid_header(message: str) -> ApiError:
    """§2.4: FET-0403 ``Invalid header``."""
    return ApiError("FET-0403", message)


def forbidden_host() -> ApiError:
    """§2.9: FET-0414 ``Forbidden Host`` with the exact message."""
    return ApiError("FET-0414", FORBIDDEN_HOST_MESSAGE)
