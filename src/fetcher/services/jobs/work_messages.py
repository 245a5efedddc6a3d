"""Work messages from the Manager to the Worker (contract §7.2, §7.3, §12.5).

The body is compact JSON with sorted keys; the signature covers ``t``, the version, the tenant,
the body's ``jobId``, the exchange (``""``), the routing key (the work queue) and the body,
under the **internal** HMAC key (global, also in multi-tenant mode).

The tenant is the job's: a job of tenant ``t`` carries ``X-Tenant-ID: t`` and ``t`` on the
signed tenant line; the tenant ``""`` (single-tenant mode) carries no ``X-Tenant-ID`` and an
empty line, exactly as before tenancy.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from fetcher.crypto import SIGNATURE_VERSION, extract_job_id, sign_message
from fetcher.services.jsontext import compact_json
from fetcher.services.records import JobRecord
from fetcher.services.timeutil import format_ms

__all__ = [
    "SIGNING_HEADERS",
    "TENANT_HEADER",
    "signed_work_headers",
    "work_message_body",
    "work_message_headers",
]

#: §7.2/§12.5: the job's tenant on a work message (absent in single-tenant mode).
TENANT_HEADER = "X-Tenant-ID"
#: Headers the publisher always overwrites (§7.2): a caller cannot inject them.
SIGNING_HEADERS = ("t", "signature-version", "x-message-signature", TENANT_HEADER)


def work_message_body(job: JobRecord) -> bytes:
    """§7.2: ``createdAt``, ``filters`` and ``limits`` (only when non-empty), ``jobId``,
    ``mappedFields`` and ``metadata`` as submitted, serialized with sorted keys."""
    message: dict[str, object] = {
        "createdAt": format_ms(job.created_at),
        "jobId": job.id,
        "mappedFields": json.loads(job.mapped_fields_json),
        "metadata": json.loads(job.metadata_json),
    }
    if job.filters_json:
        message["filters"] = json.loads(job.filters_json)
    if job.limits_json:
        message["limits"] = json.loads(job.limits_json)
    return compact_json(message, sort_keys=True).encode("utf-8")


def signed_work_headers(
    internal_key: bytes,
    body: bytes,
    *,
    routing_key: str,
    base: Mapping[str, str | int],
    t: int | None = None,
    tenant: str = "",
) -> dict[str, str | int]:
    """``base`` (jobId, x-request-id, x-retry-count) plus fresh signing headers (§7.3) and,
    for a tenant's job, ``X-Tenant-ID`` (§12.5). Any of them in ``base`` is overwritten."""
    stamp = int(time.time()) if t is None else t
    headers: dict[str, str | int] = {k: v for k, v in base.items() if k not in SIGNING_HEADERS}
    if tenant:
        headers[TENANT_HEADER] = tenant
    headers["t"] = str(stamp)
    headers["signature-version"] = SIGNATURE_VERSION
    headers["x-message-signature"] = sign_message(
        internal_key,
        t=stamp,
        body=body,
        exchange="",
        routing_key=routing_key,
        tenant=tenant,
        job_id=extract_job_id(body),
    )
    return headers


def work_message_headers(
    internal_key: bytes, job: JobRecord, body: bytes, *, routing_key: str, request_id: str
) -> dict[str, str | int]:
    """The headers of a job's first work message (§7.2): ``jobId``, ``x-request-id``,
    ``x-retry-count: 0``, signed for the job's tenant (``job.tenant``, §12.5)."""
    return signed_work_headers(
        internal_key,
        body,
        routing_key=routing_key,
        base={"jobId": job.id, "x-request-id": request_id, "x-retry-count": 0},
        tenant=job.tenant,
    )
