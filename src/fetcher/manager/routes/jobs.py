"""Job routes (contract §2.8): create (202 new, 200 duplicate), get, list (issue 21), and the
result download (§14.2)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from starlette.responses import Response, StreamingResponse

from fetcher.manager.auth import JobsRead, JobsWrite, ResultsRead
from fetcher.manager.deps import (
    RuntimeDep,
    parse_job_id,
    product_header,
    read_json_object,
    request_id,
)
from fetcher.manager.job_list_doc import JOB_LIST_DESCRIPTION
from fetcher.manager.openapi import JOB_ID, error_responses, json_request_body, parameter
from fetcher.manager.responses import json_response, json_response_off_loop
from fetcher.services.access import require_product
from fetcher.services.api.response_models import JobAccepted, JobResponse
from fetcher.services.jobs.download import HMAC_HEADER, KEY_VERSION_HEADER, byte_range
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


@router.post(
    "/{id}/cancel",
    summary="Cancel a pending or processing job",
    responses={
        200: {"model": JobResponse, "description": "The job, now canceled"},
        **error_responses(400, 404, 409),
    },
    openapi_extra={"parameters": [JOB_ID]},
)
async def cancel_job(request: Request, runtime: RuntimeDep, principal: JobsWrite) -> Response:
    """§14.4: 200 with the canceled job; 404 FET-1001 as for get; 409 FET-1104 when the job is
    already terminal."""
    job_id = parse_job_id(request.path_params["id"])
    return json_response(await runtime.jobs.cancel(job_id, principal=principal))


@router.post(
    "/{id}/retry",
    status_code=202,
    summary="Retry a failed or canceled job",
    responses={
        202: {"model": JobAccepted, "description": "Job created", "headers": _LOCATION},
        200: {"model": JobAccepted, "description": "Duplicate request", "headers": _LOCATION},
        **error_responses(400, 404, 409),
    },
    openapi_extra={"parameters": [JOB_ID]},
)
async def retry_job(request: Request, runtime: RuntimeDep, principal: JobsWrite) -> Response:
    """§14.5: the job's request submitted again (§3.6), answered as ``POST /v1/fetcher``;
    404 FET-1001 as for get; 409 FET-1105 unless the job is failed or canceled."""
    job_id = parse_job_id(request.path_params["id"])
    result, created = await runtime.jobs.retry(
        job_id, request_id=request_id(request), principal=principal
    )
    return json_response(
        result,
        202 if created else 200,
        {"Location": f"/v1/fetcher/{result['jobId']}"},
    )


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


_RESULT_HEADERS = {
    "Content-Length": {"description": "Bytes in this response", "schema": {"type": "integer"}},
    "ETag": {"description": "The job's result HMAC, quoted", "schema": {"type": "string"}},
    "Accept-Ranges": {"description": "bytes", "schema": {"type": "string"}},
    HMAC_HEADER: {"description": "resultHmac (§6.3)", "schema": {"type": "string"}},
    KEY_VERSION_HEADER: {
        "description": "The key version that sealed the object (§14.3); absent for jobs "
        "completed before versions were recorded",
        "schema": {"type": "string"},
    },
}
_OCTETS = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


@router.get(
    "/{id}/result",
    summary="Download a job's encrypted result object",
    responses={
        200: {
            "description": "The whole stored object",
            "headers": _RESULT_HEADERS,
            "content": _OCTETS,
        },
        206: {
            "description": "One byte range of it, with Content-Range",
            "headers": _RESULT_HEADERS,
            "content": _OCTETS,
        },
        304: {"description": "If-None-Match matched the ETag"},
        **error_responses(400, 404, 410, 416),
    },
    openapi_extra={
        "parameters": [
            JOB_ID,
            parameter("Range", "header", "One range, bytes=<first>-[<last>] or bytes=-<n>"),
            parameter("If-Range", "header", "The ETag: a range is served only if it matches"),
            parameter("If-None-Match", "header", "The ETag: 304 when it matches"),
        ]
    },
)
async def download_result(
    request: Request, runtime: RuntimeDep, principal: ResultsRead
) -> Response:
    """§14.2: the stored ciphertext, streamed; 404 FET-1100 before completion, 410 FET-1101
    once the object is gone, 416 FET-1102 for a range past the end."""
    job_id = parse_job_id(request.path_params["id"])
    found = await runtime.downloads.locate(job_id, principal=principal)
    headers = {
        "ETag": found.etag,
        "Accept-Ranges": "bytes",
        HMAC_HEADER: found.hmac,
        "Cache-Control": "private, no-store",
    }
    if found.key_version is not None:
        headers[KEY_VERSION_HEADER] = found.key_version
    if found.etag in _etags(request.headers.get("if-none-match")):
        return Response(status_code=304, headers=headers)
    wanted = request.headers.get("range")
    if_range = request.headers.get("if-range")
    span = byte_range(wanted, found.size) if if_range in (None, found.etag) else None
    start, end = span if span is not None else (0, found.size - 1)
    first, rest = await runtime.downloads.first_chunk(found, start, end)
    headers["Content-Length"] = str(end - start + 1)
    if span is not None:
        headers["Content-Range"] = f"bytes {start}-{end}/{found.size}"

    async def body() -> AsyncIterator[bytes]:
        yield first
        async for chunk in rest:
            yield chunk

    return StreamingResponse(
        body(),
        status_code=206 if span is not None else 200,
        headers=headers,
        media_type="application/octet-stream",
    )


def _etags(header: str | None) -> set[str]:
    """The entity tags of an ``If-None-Match`` header (weak ones compared weakly)."""
    if header is None:
        return set()
    return {tag.strip().removeprefix("W/") for tag in header.split(",")}
