"""Work messages from the Manager to the Worker (contract §7.2, §7.3).

The body is compact JSON with sorted keys; the signature covers ``t``, the version, the tenant
(empty), the body's ``jobId``, the exchange (``""``), the routing key (the work queue) and the
body, under the **internal** HMAC key.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from fetcher.crypto import SIGNATURE_VERSION, extract_job_id, sign_message
from fetcher.services.records import JobRecord
from fetcher.services.timeutil import format_ms

__all__ = ["SIGNING_HEADERS", "signed_work_headers", "work_message_body"]

#: Headers the publisher always overwrites (§7.2): a caller cannot inject them.
SIGNING_HEADERS = ("t", "signature-version", "x-message-signature", "X-Tenant-ID")


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
    text = json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def signed_work_headers(
    internal_key: bytes,
    body: bytes,
    *,
    routing_key: str,
    base: Mapping[str, str | int],
    t: int | None = None,
) -> dict[str, str | int]:
    """``base`` (jobId, x-request-id, x-retry-count) plus fresh signing headers (§7.3)."""
    stamp = int(time.time()) if t is None else t
    headers: dict[str, str | int] = {k: v for k, v in base.items() if k not in SIGNING_HEADERS}
    headers["t"] = str(stamp)
    headers["signature-version"] = SIGNATURE_VERSION
    headers["x-message-signature"] = sign_message(
        internal_key,
        t=stamp,
        body=body,
        exchange="",
        routing_key=routing_key,
        job_id=extract_job_id(body),
    )
    return headers
