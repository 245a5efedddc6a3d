"""Job routes (contract §2.8): create (202 new, 200 duplicate), get, and list (issue 21)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from fetcher.manager.auth import JobsRead, JobsWrite
from fetcher.manager.deps import (
    RuntimeDep,
    parse_job_id,
    product_header,
    read_json_object,
    request_id,
)
from fetcher.manager.job_list_doc import JOB_LIST_DESCRIPTION
from fetcher.manager.openapi import JOB_ID, error_responses, json_request_body
from fetcher.manager.responses import json_response, json_response_off_loop
from fetcher.services.access import require_product
from fetcher.services.api.response_models import JobAccepted, JobResponse
from fetcher.services.jobs.list_query import parse_job_list
from fetcher.services.jobs.listing import JobPage

__all__ = ["router"]

router = APIRouter(prefix="/v1/fetcher", tags=["jobs"])

_LOCATION = {"Location": {"description": "/v1/fetcher/<jobId>", "schema": {"type": "string"}}}


@router.post(
    "",
    status_code=202,
    summary="Create an extraction job",
    responses={
        202: {"model": JobAccepted, "description": "Job created", "headers": _LOCATION},
        200: {"model": JobAccepted, "description": "Duplicate request", "headers": _LOCATION},
        **error_responses(400, 413, 415),
    },
    openapi_extra=json_request_body("JobRequest"),
)
async def create_job(request: Request, runtime: RuntimeDep, principal: JobsWrite) -> Response:
    """§3.6: steps 1, 1a and 2 here, 3–16 in the service."""
    body = await read_json_object(request)
    result, created = await runtime.jobs.create(
        body, request_id=request_id(request), principal=principal
    )
    return json_response(
        result,
        202 if created else 200,
        {"Location": f"/v1/fetcher/{result['jobId']}"},
    )


@router.get(
    "/{id}",
    summary="Get a job",
    responses={200: {"model": JobResponse, "description": "The job"}, **error_responses(400, 404)},
    openapi_extra={"parameters": [JOB_ID]},
)
async def get_job(request: Request, runtime: RuntimeDep, principal: JobsRead) -> Response:
    """§2.8: 400 FET-0404 for a non-UUID, 404 FET-1001 when unknown, another tenant's
    (§12.5) or, for a product-restricted token, another product's (§12.4)."""
    job_id = parse_job_id(request.path_params["id"])
    return json_response(await runtime.jobs.get(job_id, principal=principal))


@router.get(
    "",
    summary="List and search jobs",
    description=JOB_LIST_DESCRIPTION,
    responses={200: {"model": JobPage, "description": "A page"}, **error_responses(400)},
)  # its parameters: fetcher.manager.job_list_doc.add_job_list_parameters
async def list_jobs(request: Request, runtime: RuntimeDep, principal: JobsRead) -> Response:
    """Issue 21, in the connection list's order (§2.6.2, §12.4): the header, the restricted
    token's product, then every query parameter at once, then the cursor's signature."""
    product = product_header(request, required=False)
    if product is not None:
        require_product(principal, product)  # §12.4
    query = parse_job_list(
        request.query_params.multi_items(), max_limit=runtime.settings.max_pagination_limit
    )
    page = await runtime.job_list.list_page(query, product=product, principal=principal)
    return await json_response_off_loop(page)
