"""Connection routes (contract §2.6). Each route parses, calls the service, maps the result."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from fetcher.manager.auth import ConnectionsRead, ConnectionsWrite
from fetcher.manager.deps import (
    RuntimeDep,
    parse_connection_id,
    parse_list_request,
    product_header,
    read_json_object,
)
from fetcher.manager.openapi import (
    CONNECTION_ID,
    LIST_DESCRIPTION,
    list_parameters,
    product_header_parameter,
    schemas_parameter,
)
from fetcher.manager.responses import json_response
from fetcher.manager.schemas import (
    ConnectionPage,
    ConnectionResponse,
    SchemaResponse,
    TestResult,
    ValidateSchemaSuccess,
    error_responses,
    json_request_body,
)
from fetcher.services.connections import connection_response

__all__ = ["router"]

router = APIRouter(prefix="/v1/management/connections", tags=["connections"])

_ID = CONNECTION_ID
_PRODUCT_REQUIRED = product_header_parameter(required=True)
_PRODUCT_OPTIONAL = product_header_parameter(required=False)
#: ``create_app`` fits ``limit`` to ``MAX_PAGINATION_LIMIT`` in the served document.
_LIST_PARAMS = list_parameters(100)


def _ok(model: type[Any], description: str, status: int = 200) -> dict[int | str, Any]:
    return {status: {"model": model, "description": description}}


@router.post(
    "",
    status_code=201,
    summary="Create a connection",
    responses={**_ok(ConnectionResponse, "Created", 201), **error_responses(400, 409, 413, 415)},
    openapi_extra={**json_request_body("ConnectionCreate"), "parameters": [_PRODUCT_REQUIRED]},
)
async def create_connection(
    request: Request, runtime: RuntimeDep, principal: ConnectionsWrite
) -> Response:
    """§2.6.1: header, body, then the service's field checks, SSRF and uniqueness."""
    product = product_header(request, required=True)
    body = await read_json_object(request)
    record = await runtime.connections.create(body, product or "")
    return json_response(connection_response(record), 201)


@router.get(
    "",
    summary="List connections",
    description=LIST_DESCRIPTION,
    responses={**_ok(ConnectionPage, "A page"), **error_responses(400)},
    openapi_extra={"parameters": [_PRODUCT_OPTIONAL, *_LIST_PARAMS]},
)
async def list_connections(
    request: Request, runtime: RuntimeDep, principal: ConnectionsRead
) -> Response:
    """§2.6.2: internal datasources first when ``X-Product-Name`` is absent."""
    product = product_header(request, required=False)
    query = parse_list_request(
        request.query_params, max_limit=runtime.settings.max_pagination_limit
    )
    return json_response(await runtime.connections.list_page(query, product=product))


@router.get(
    "/unassigned",
    summary="List connections without a product",
    description=LIST_DESCRIPTION,
    responses={**_ok(ConnectionPage, "A page"), **error_responses(400)},
    openapi_extra={"parameters": _LIST_PARAMS},
)
async def list_unassigned(
    request: Request, runtime: RuntimeDep, principal: ConnectionsRead
) -> Response:
    """§2.6.3: stored connections with no product; the header is ignored."""
    query = parse_list_request(
        request.query_params, max_limit=runtime.settings.max_pagination_limit
    )
    page = await runtime.connections.list_page(query, product=None, unassigned=True)
    return json_response(page)


@router.post(
    "/validate-schema",
    summary="Validate datasources, tables and fields",
    responses={
        **_ok(ValidateSchemaSuccess, "Every datasource, table and field exists"),
        **error_responses(400, 413, 415, 422),
    },
    openapi_extra=json_request_body("ValidateSchemaRequest"),
)
async def validate_schema(
    request: Request, runtime: RuntimeDep, principal: ConnectionsRead
) -> Response:
    """§2.6.9: 200, or 422 FET-1060 with the sorted ``errors``."""
    body = await read_json_object(request)
    return json_response(await runtime.connections.validate_schema(body))


@router.get(
    "/{id}",
    summary="Get a connection",
    responses={**_ok(ConnectionResponse, "The connection"), **error_responses(400, 404)},
    openapi_extra={"parameters": [_ID]},
)
async def get_connection(
    request: Request, runtime: RuntimeDep, principal: ConnectionsRead
) -> Response:
    """§2.6.4: an internal datasource or a non-deleted stored connection."""
    connection_id = parse_connection_id(request.path_params["id"], static_first=True)
    return json_response(await runtime.connections.describe(connection_id))


@router.patch(
    "/{id}",
    summary="Update a connection",
    responses={
        **_ok(ConnectionResponse, "The updated connection"),
        **error_responses(400, 404, 409, 413, 415),
    },
    openapi_extra={**json_request_body("ConnectionUpdate"), "parameters": [_ID]},
)
async def update_connection(
    request: Request, runtime: RuntimeDep, principal: ConnectionsWrite
) -> Response:
    """§2.6.5: path ID, body, then the service's checks in order."""
    connection_id = parse_connection_id(request.path_params["id"], static_first=True)
    body = await read_json_object(request)
    return json_response(await runtime.connections.update(connection_id, body))


@router.delete(
    "/{id}",
    status_code=204,
    summary="Delete a connection (soft)",
    responses={204: {"description": "Deleted"}, **error_responses(400, 404, 409)},
    openapi_extra={"parameters": [_ID]},
)
async def delete_connection(
    request: Request, runtime: RuntimeDep, principal: ConnectionsWrite
) -> Response:
    """§2.6.6: 204 with an empty body."""
    connection_id = parse_connection_id(request.path_params["id"], static_first=True)
    await runtime.connections.delete(connection_id)
    return Response(status_code=204)


@router.post(
    "/{id}/test",
    summary="Test a connection",
    responses={**_ok(TestResult, "The probe result"), **error_responses(400, 404, 429)},
    openapi_extra={"parameters": [_ID]},
)
async def test_connection(
    request: Request, runtime: RuntimeDep, principal: ConnectionsRead
) -> Response:
    """§2.6.7: rate-limited live test; any body is ignored."""
    connection_id = parse_connection_id(request.path_params["id"])
    return json_response(await runtime.connections.test(connection_id))


@router.get(
    "/{id}/schema",
    summary="Discover a connection's schema",
    responses={**_ok(SchemaResponse, "Tables and fields"), **error_responses(400, 404, 502)},
    openapi_extra={"parameters": [_ID, schemas_parameter()]},
)
async def connection_schema(
    request: Request, runtime: RuntimeDep, principal: ConnectionsRead
) -> Response:
    """§2.6.8: fresh discovery."""
    connection_id = parse_connection_id(request.path_params["id"])
    schemas = request.query_params.get("schemas")
    return json_response(await runtime.connections.schema(connection_id, schemas))


@router.post(
    "/{id}/assign",
    summary="Assign a product to a connection",
    responses={
        **_ok(ConnectionResponse, "The assigned connection"),
        **error_responses(400, 404, 409),
    },
    openapi_extra={"parameters": [_ID, _PRODUCT_REQUIRED]},
)
async def assign_connection(
    request: Request, runtime: RuntimeDep, principal: ConnectionsWrite
) -> Response:
    """§2.6.10: header, path ID, then existence, internal and the atomic assignment."""
    product = product_header(request, required=True)
    connection_id = parse_connection_id(request.path_params["id"])
    return json_response(await runtime.connections.assign(connection_id, product or ""))
