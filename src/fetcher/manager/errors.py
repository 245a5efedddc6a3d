"""The one table from FET code to HTTP status and title, and the §2.2 error body.

Every row of contract §2.3 is here, and the two codes issue 33 added (FET-0013, FET-0014,
docs/security.md). Codes with several titles list them all; the first is the
default, and :func:`title_for` applies the §2.3 title-selection rules: an explicit
``ApiError.title`` wins when it is one of the code's titles, FET-1020 picks
``Missing Data Source`` from its message, and every other case gets the default title.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from fetcher.services.api.request_origin import (
    CROSS_SITE_CODE,
    CROSS_SITE_TITLE,
    MISDIRECTED_CODE,
    MISDIRECTED_TITLE,
)
from fetcher.services.errors import ApiError

__all__ = [
    "FET_CODES",
    "INTERNAL_ERROR_MESSAGE",
    "CodeInfo",
    "error_body",
    "internal_error",
    "status_for",
    "title_for",
]

#: §2.2: the exact message of an unhandled exception (500 FET-0002).
INTERNAL_ERROR_MESSAGE = (
    "The server encountered an unexpected error. Please try again later or contact support."
)


@dataclass(frozen=True, slots=True)
class CodeInfo:
    """One §2.3 row: the HTTP status and the titles, default first."""

    status: int
    titles: tuple[str, ...]

    @property
    def default_title(self) -> str:
        return self.titles[0]


def _row(status: int, *titles: str) -> CodeInfo:
    return CodeInfo(status, titles)


FET_CODES: Mapping[str, CodeInfo] = MappingProxyType(
    {
        "FET-0001": _row(400, "Bad Request", "Invalid payload"),
        "FET-0002": _row(500, "Internal Server Error"),
        "FET-0003": _row(503, "Service Unavailable"),
        "FET-0004": _row(409, "Conflict"),
        "FET-0005": _row(404, "Not Found"),
        "FET-0006": _row(429, "Too Many Requests"),
        "FET-0007": _row(413, "Payload Too Large"),
        "FET-0008": _row(405, "Method Not Allowed"),
        "FET-0009": _row(415, "Unsupported Media Type"),
        "FET-0010": _row(401, "Unauthorized"),
        "FET-0011": _row(403, "Forbidden"),
        "FET-0012": _row(403, "Product Not Allowed"),
        # Issue 33 (docs/security.md), not in contract §2.3: the Host and cross-site checks.
        MISDIRECTED_CODE: _row(421, MISDIRECTED_TITLE),
        CROSS_SITE_CODE: _row(403, CROSS_SITE_TITLE),
        "FET-0400": _row(400, "Unexpected Fields in the Request"),
        "FET-0401": _row(400, "Invalid Data Request", "Invalid Filter References"),
        "FET-0402": _row(
            400, "Missing Fields in Request", "Missing Required Field", "Invalid Field Value"
        ),
        "FET-0403": _row(400, "Invalid header"),
        "FET-0404": _row(400, "Invalid Path Parameter"),
        "FET-0405": _row(400, "Invalid Query Parameter"),
        "FET-0406": _row(400, "Pagination Limit Exceeded"),
        "FET-0407": _row(400, "Invalid Sort Order"),
        "FET-0408": _row(400, "Invalid Date Format"),
        "FET-0409": _row(400, "Invalid Final Date"),
        "FET-0410": _row(400, "Invalid Metadata Nesting"),
        "FET-0411": _row(400, "Metadata Value Too Long"),
        "FET-0412": _row(400, "Metadata Key Too Long"),
        "FET-0413": _row(400, "Invalid SSL Mode"),
        "FET-0414": _row(400, "Forbidden Host"),
        "FET-1001": _row(404, "Entity Not Found"),
        "FET-1002": _row(409, "Conflict"),
        "FET-1014": _row(400, "Connection Not Assigned"),
        "FET-1015": _row(409, "Connection Already Assigned"),
        "FET-1016": _row(400, "Product Mismatch"),
        "FET-1020": _row(400, "No Connections Found", "Missing Data Source"),
        "FET-1021": _row(409, "Job In Progress"),
        "FET-1040": _row(400, "Connection Down"),
        "FET-1041": _row(502, "Database Connection Error"),
        "FET-1042": _row(502, "Schema Retrieval Error"),
        "FET-1060": _row(422, "Schema validation failed"),
        "FET-1061": _row(400, "Schema Validation Limit"),
        "FET-1062": _row(400, "No Connections Found"),
        "FET-1080": _row(400, "Tenant Context Required"),
        "FET-1081": _row(404, "Tenant Not Found"),
        "FET-1100": _row(404, "Result Not Available"),
        "FET-1101": _row(410, "Result Expired"),
        "FET-1102": _row(416, "Range Not Satisfiable"),
        "FET-1103": _row(503, "Result Storage Unavailable"),
        "FET-1104": _row(409, "Job Not Cancelable"),
        "FET-1105": _row(409, "Job Not Retryable"),
    }
)

#: §2.3 FET-1020: the ``Missing Data Source`` message prefix (one name does not resolve).
_MISSING_DATA_SOURCE_PREFIX = "No connection configured for datasource"


def internal_error() -> ApiError:
    """§2.2: the 500 FET-0002 error with its exact message."""
    return ApiError("FET-0002", INTERNAL_ERROR_MESSAGE)


def _known(err: ApiError) -> ApiError:
    """An error whose code is in the table; an unknown code is a bug and becomes FET-0002."""
    return err if err.code in FET_CODES else internal_error()


def status_for(err: ApiError) -> int:
    """The HTTP status of ``err`` (500 for a code that is not in §2.3)."""
    return FET_CODES[_known(err).code].status


def title_for(err: ApiError) -> str:
    """§2.3 title selection for ``err``."""
    err = _known(err)
    info = FET_CODES[err.code]
    if err.title is not None and err.title in info.titles:
        return err.title
    if err.code == "FET-1020" and err.message.startswith(_MISSING_DATA_SOURCE_PREFIX):
        return "Missing Data Source"
    return info.default_title


def error_body(err: ApiError) -> dict[str, object]:
    """The §2.2 body: ``code``, ``title``, ``message``, then ``fields``/``errors`` when present."""
    known = _known(err)
    body: dict[str, object] = {
        "code": known.code,
        "title": title_for(known),
        "message": known.message,
    }
    if known.fields:
        body["fields"] = dict(known.fields)
    if known.errors is not None:
        body["errors"] = [dict(e) for e in known.errors]
    return body
