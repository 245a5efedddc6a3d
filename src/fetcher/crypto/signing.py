"""Message signatures: work messages (CONTRACT §7.3) and job events (§8.5).

Signed bytes: ``t "\\n" "v1" "\\n" tenant "\\n" jobId "\\n" exchange "\\n" routingKey "\\n" body``.

* Work messages: the **internal** key, exchange ``""``, routing key = the work queue, jobId = the
  body's top-level string ``jobId`` (:func:`extract_job_id`), tenant empty in single-tenant mode.
* Job events: the **external** key, exchange = the events exchange, routing key
  ``job.<status>``, and an **empty** jobId line (the v2 body carries ``job_id``).

Signatures are lower-case hex HMAC-SHA256; verification is constant time.
"""

from __future__ import annotations

import json

from fetcher.crypto.hmac import hmac_hex, verify_hex

__all__ = [
    "SIGNATURE_VERSION",
    "extract_job_id",
    "sign_message",
    "signing_input",
    "verify_message",
]

SIGNATURE_VERSION = "v1"
"""The ``signature-version`` header value (§7.2)."""


def signing_input(  # noqa: PLR0917 - positional order mirrors the §7.3 line order
    t: str | int, tenant: str, job_id: str, exchange: str, routing_key: str, body: bytes
) -> bytes:
    """The exact bytes that §7.3 signs. ``t`` is Unix seconds (decimal string or int)."""
    head = f"{t}\n{SIGNATURE_VERSION}\n{tenant}\n{job_id}\n{exchange}\n{routing_key}\n"
    return head.encode("utf-8") + bytes(body)


def sign_message(
    key: bytes,
    *,
    t: str | int,
    body: bytes,
    exchange: str,
    routing_key: str,
    tenant: str = "",
    job_id: str = "",
) -> str:
    """Lower-case hex HMAC-SHA256 of :func:`signing_input` under ``key``.

    Work messages pass ``job_id=extract_job_id(body)``; events leave it empty (§8.5).
    """
    return hmac_hex(key, signing_input(t, tenant, job_id, exchange, routing_key, body))


def verify_message(
    key: bytes,
    signature: str | bytes,
    *,
    t: str | int,
    body: bytes,
    exchange: str,
    routing_key: str,
    tenant: str = "",
    job_id: str = "",
) -> bool:
    """Constant-time check of ``signature`` against :func:`sign_message` (§7.4 row 2)."""
    return verify_hex(key, signing_input(t, tenant, job_id, exchange, routing_key, body), signature)


def extract_job_id(body: bytes) -> str:
    """The top-level string ``jobId`` of a JSON object body, else ``""``. Never raises."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError, TypeError):
        return ""
    if isinstance(doc, dict):
        value = doc.get("jobId")
        if isinstance(value, str):
            return value
    return ""
