"""The FET code table and the §2.2 error body (contract §2.2, §2.3)."""

from __future__ import annotations

import pytest

from fetcher.manager.errors import (
    FET_CODES,
    INTERNAL_ERROR_MESSAGE,
    error_body,
    internal_error,
    status_for,
    title_for,
)
from fetcher.services.errors import (
    MISSING_FIELDS_MESSAGE,
    ApiError,
    Title,
    bad_request,
    forbidden_host,
    invalid_data_request,
    invalid_filter_references,
    invalid_header,
    invalid_payload,
    missing_fields,
    unexpected_fields,
)

#: §2.3, every row: code → (status, titles).
CONTRACT_TABLE: dict[str, tuple[int, tuple[str, ...]]] = {
    "FET-0001": (400, ("Bad Request", "Invalid payload")),
    "FET-0002": (500, ("Internal Server Error",)),
    "FET-0003": (503, ("Service Unavailable",)),
    "FET-0004": (409, ("Conflict",)),
    "FET-0005": (404, ("Not Found",)),
    "FET-0006": (429, ("Too Many Requests",)),
    "FET-0007": (413, ("Payload Too Large",)),
    "FET-0008": (405, ("Method Not Allowed",)),
    "FET-0009": (415, ("Unsupported Media Type",)),
    "FET-0010": (401, ("Unauthorized",)),
    "FET-0011": (403, ("Forbidden",)),
    "FET-0012": (403, ("Product Not Allowed",)),
    # Issue 33 (docs/security.md): the Host allow-list and the cross-site refusal.
    "FET-0013": (421, ("Misdirected Request",)),
    "FET-0014": (403, ("Cross-Site Request",)),
    "FET-0400": (400, ("Unexpected Fields in the Request",)),
    "FET-0401": (400, ("Invalid Data Request", "Invalid Filter References")),
    "FET-0402": (
        400,
        ("Missing Fields in Request", "Missing Required Field", "Invalid Field Value"),
    ),
    "FET-0403": (400, ("Invalid header",)),
    "FET-0404": (400, ("Invalid Path Parameter",)),
    "FET-0405": (400, ("Invalid Query Parameter",)),
    "FET-0406": (400, ("Pagination Limit Exceeded",)),
    "FET-0407": (400, ("Invalid Sort Order",)),
    "FET-0408": (400, ("Invalid Date Format",)),
    "FET-0409": (400, ("Invalid Final Date",)),
    "FET-0410": (400, ("Invalid Metadata Nesting",)),
    "FET-0411": (400, ("Metadata Value Too Long",)),
    "FET-0412": (400, ("Metadata Key Too Long",)),
    "FET-0413": (400, ("Invalid SSL Mode",)),
    "FET-0414": (400, ("Forbidden Host",)),
    "FET-1001": (404, ("Entity Not Found",)),
    "FET-1002": (409, ("Conflict",)),
    "FET-1014": (400, ("Connection Not Assigned",)),
    "FET-1015": (409, ("Connection Already Assigned",)),
    "FET-1016": (400, ("Product Mismatch",)),
    "FET-1020": (400, ("No Connections Found", "Missing Data Source")),
    "FET-1021": (409, ("Job In Progress",)),
    "FET-1040": (400, ("Connection Down",)),
    "FET-1041": (502, ("Database Connection Error",)),
    "FET-1042": (502, ("Schema Retrieval Error",)),
    "FET-1060": (422, ("Schema validation failed",)),
    "FET-1061": (400, ("Schema Validation Limit",)),
    "FET-1062": (400, ("No Connections Found",)),
    "FET-1080": (400, ("Tenant Context Required",)),
    "FET-1081": (404, ("Tenant Not Found",)),
    "FET-1100": (404, ("Result Not Available",)),
    "FET-1101": (410, ("Result Expired",)),
    "FET-1102": (416, ("Range Not Satisfiable",)),
    "FET-1103": (503, ("Result Storage Unavailable",)),
    "FET-1104": (409, ("Job Not Cancelable",)),
    "FET-1105": (409, ("Job Not Retryable",)),
}


def test_table_has_exactly_the_contract_rows() -> None:
    assert set(FET_CODES) == set(CONTRACT_TABLE)


@pytest.mark.parametrize("code", sorted(CONTRACT_TABLE))
def test_status_and_default_title_per_code(code: str) -> None:
    status, titles = CONTRACT_TABLE[code]
    err = ApiError(code, "x")
    assert status_for(err) == status
    assert title_for(err) == titles[0]
    assert FET_CODES[code].titles == titles


@pytest.mark.parametrize(
    ("err", "title"),
    [
        (invalid_payload("empty request body"), "Invalid payload"),
        (bad_request({"port": "port must be an integer"}), "Bad Request"),
        (ApiError("FET-0001", "port cannot be null", fields={"port": "x"}), "Bad Request"),
        (invalid_data_request("mappedFields cannot be empty"), "Invalid Data Request"),
        (invalid_filter_references("filter references …"), "Invalid Filter References"),
        (missing_fields(["host"]), "Missing Fields in Request"),
        (ApiError("FET-0402", "m", title=Title.MISSING_REQUIRED_FIELD), "Missing Required Field"),
        (ApiError("FET-0402", "m", title=Title.INVALID_FIELD_VALUE), "Invalid Field Value"),
        (
            ApiError("FET-1020", "No connections configured for the requested datasources"),
            "No Connections Found",
        ),
        (
            ApiError("FET-1020", "No connection configured for datasource 'pg'"),
            "Missing Data Source",
        ),
        (ApiError("FET-1020", "m", title=Title.MISSING_DATA_SOURCE), "Missing Data Source"),
    ],
)
def test_title_selection(err: ApiError, title: str) -> None:
    assert title_for(err) == title


def test_a_title_foreign_to_the_code_falls_back_to_the_default() -> None:
    assert title_for(ApiError("FET-0403", "m", title="Invalid payload")) == "Invalid header"


def test_error_body_without_fields_has_three_keys() -> None:
    body = error_body(invalid_header("X-Product-Name must not exceed 100 characters"))
    assert body == {
        "code": "FET-0403",
        "title": "Invalid header",
        "message": "X-Product-Name must not exceed 100 characters",
    }


def test_error_body_with_fields() -> None:
    body = error_body(missing_fields(["port"]))
    assert body == {
        "code": "FET-0402",
        "title": "Missing Fields in Request",
        "message": MISSING_FIELDS_MESSAGE,
        "fields": {"port": "port is a required field"},
    }
    assert isinstance(body["code"], str)


def test_empty_fields_are_omitted() -> None:
    assert "fields" not in error_body(ApiError("FET-0001", "m", fields={}))


def test_unexpected_fields_body() -> None:
    body = error_body(unexpected_fields(["dataRequest.foo"]))
    assert body["code"] == "FET-0400"
    assert body["title"] == "Unexpected Fields in the Request"
    assert body["fields"] == {"dataRequest.foo": "unexpected field"}


def test_errors_member_for_schema_validation() -> None:
    err = ApiError(
        "FET-1060",
        "Schema validation found inconsistencies.",
        errors=[{"type": "DATA_SOURCE_NOT_FOUND", "dataSourceId": "x"}],
    )
    assert status_for(err) == 422
    assert error_body(err)["errors"] == [{"type": "DATA_SOURCE_NOT_FOUND", "dataSourceId": "x"}]


def test_forbidden_host_message_is_exact() -> None:
    body = error_body(forbidden_host())
    assert body["message"] == "Host is not a valid external database endpoint"
    assert body["title"] == "Forbidden Host"


def test_internal_error_body() -> None:
    err = internal_error()
    assert status_for(err) == 500
    assert error_body(err) == {
        "code": "FET-0002",
        "title": "Internal Server Error",
        "message": INTERNAL_ERROR_MESSAGE,
    }
    assert INTERNAL_ERROR_MESSAGE == (
        "The server encountered an unexpected error. Please try again later or contact support."
    )


def test_unknown_code_becomes_internal_error() -> None:
    err = ApiError("FET-9999", "secret detail")
    assert status_for(err) == 500
    assert error_body(err)["code"] == "FET-0002"
    assert "secret detail" not in str(error_body(err))
