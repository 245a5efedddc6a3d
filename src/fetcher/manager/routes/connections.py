"""Connection routes (contract §2.6). Each route parses, calls the service, maps the result.

The route's Principal (§12.3 guard) goes to the service, which scopes everything to its tenant
and products (§12.4, §12.5). The §12.4 checks that precede parsing run here, in their place:
create's product right after the §2.4 header checks (before the body), and the
unrestricted-only rule of list unassigned and assign right after the scope check.
"""

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
    error_responses,
    json_request_body,
    list_parameters,
    product_header_parameter,
    schemas_parameter,
)
from fetcher.manager.responses import json_response, json_response_off_loop
from fetcher.services.access import require_product, require_unrestricted
from fetcher.services.api.response_models import (
    ConnectionPage,
    ConnectionResponse,
    SchemaResponse,
    TestResult,
    ValidateSchemaSuccess,
)
from fetcher.services.connections.stored import connection_response

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
    product = product_header(request, required=True) or ""
    require_product(principal, product)  # §12.4: after the §2.4 checks, before the body
    body = await read_json_object(request)
    record = await runtime.connections.editor.create(body, product, principal=principal)
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
    if product is not None:
        require_product(principal, product)  # §12.4
    query = parse_list_request(
        request.query_params, max_limit=runtime.settings.max_pagination_limit
    )
    page = await runtime.connections.catalog.list_page(query, product=product, principal=principal)
    return await json_response_off_loop(page)


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
    require_unrestricted(principal)  # §12.4: right after the scope check
    query = parse_list_request(
        request.query_params, max_limit=runtime.settings.max_pagination_limit
    )
    page = await runtime.connections.catalog.list_page(
        query, product=None, principal=principal, unassigned=True
    )
    return await json_response_off_loop(page)


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
    return json_response(
        await runtime.connections.schemas.validate_schema(body, principal=principal)
    )


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
    return json_response(await runtime.connections.catalog.describe(connection_id, principal))


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
    return json_response(
        await runtime.connections.editor.update(connection_id, body, principal=principal)
    )


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
    await runtime.connections.editor.delete(connection_id, principal=principal)
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
    return json_response(await runtime.connections.tester.test(connection_id, principal=principal))


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
    return json_response(
        await runtime.connections.schemas.schema(connection_id, schemas, principal=principal)
    )


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
    require_unrestricted(principal)  # §12.4: right after the scope check
    product = product_header(request, required=True)
    connection_id = parse_connection_id(request.path_params["id"])
    assigned = await runtime.connections.editor.assign(
        connection_id, product or "", principal=principal
    )
    return json_response(assigned)
