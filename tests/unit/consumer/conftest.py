"""Helpers for the consumer-kit unit tests: signed events and stored objects built with the
§6.6 master key, through fetcher.crypto (whose own vectors are tested in tests/unit/crypto)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fetcher.consumer import ConsumerKeys
from fetcher.crypto import encrypt_object, hmac_hex, sign_message

MASTER_KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
EXCHANGE = "fetcher.job.events"
NOW = 1_700_000_000
JOB_ID = "0190a1b2-0000-7000-8000-000000000001"


def failed_body(job_id: str = JOB_ID) -> bytes:
    return (
        f'{{"job_id":"{job_id}","status":"failed","metadata":{{"source":"payments",'
        '"error":{"message":"failed to connect to datasource"}}}'
    ).encode()


def completed_body(path: str, mac: str, size: int, rows: int, job_id: str = JOB_ID) -> bytes:
    payload = {
        "job_id": job_id,
        "status": "completed",
        "metadata": {"source": "payments", "correlationId": "c-1"},
        "result": {
            "path": path,
            "size_bytes": size,
            "row_count": rows,
            "format": "json",
            "hmac": mac,
            "integrity": {"algorithm": "HMAC-SHA256", "signature": mac},
            "protection": {"encrypted": True, "applied_by": "adapter", "mode": "adapter-managed"},
        },
        "execution_time_ms": 42,
        "completed_at": "2026-07-13T18:04:11.204Z",
    }
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def ce_headers(status: str, job_id: str = JOB_ID, tenant: str = "single-tenant") -> dict[str, str]:
    return {
        "ce-specversion": "1.0",
        "ce-id": f"fetcher.job.{status}.{job_id}",
        "ce-source": "//lerian.fetcher/worker",
        "ce-type": f"studio.lerian.job.{status}",
        "ce-time": "2023-11-14T22:13:20.000Z",
        "ce-subject": job_id,
        "ce-resourcetype": "job",
        "ce-eventtype": status,
        "ce-schemaversion": "2.0.0",
        "ce-datacontenttype": "application/json",
        "ce-tenantid": tenant,
    }


def signed(
    keys: ConsumerKeys,
    status: str,
    body: bytes,
    *,
    t: int = NOW,
    job_id: str = JOB_ID,
) -> dict[str, Any]:
    """§8.4 headers plus the §8.5 signing headers, as the Worker sends them."""
    headers: dict[str, Any] = ce_headers(status, job_id, keys.tenant_id)
    if keys.tenant is not None:
        headers["X-Tenant-ID"] = keys.tenant
    headers["t"] = str(t)
    headers["signature-version"] = "v1"
    headers["x-message-signature"] = sign_message(
        keys.external_hmac,
        t=t,
        body=body,
        exchange=EXCHANGE,
        routing_key=f"job.{status}",
        tenant=keys.tenant or "",
    )
    return headers


def store_document(
    root: Path, keys: ConsumerKeys, document: bytes, key: str = "external-data/x.json"
) -> tuple[str, str]:
    """Encrypt ``document`` as §6.3 under ``keys`` at ``root/key``; return (key, hmac)."""
    assert keys.storage is not None
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encrypt_object(keys.storage, document))
    return key, hmac_hex(keys.external_hmac, document)


def document_bytes(doc: Mapping[str, Any]) -> bytes:
    """§5.4 serialization (indent 2, sorted keys, no trailing newline)."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False).encode()
