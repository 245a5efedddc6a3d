"""The result summary of a completed job (contract §14.1): what the Worker records with the
terminal status, and the ``result`` member of the job answers built from it.

Stored as JSON text ``{"sizeBytes","plaintextBytes","rowCount","tables"}`` next to the job's
``result_path``, ``result_hmac`` and ``result_key_version`` (§14.3). ``tables`` is
``{datasource: {tableKey: rows}}`` in document order, the same counts as the decrypted
document's arrays. A job completed before summaries were recorded has only its path and HMAC,
and its ``result`` carries only those (plus the two retention members, always present).

The list (``GET /v1/fetcher``) leaves ``tables`` out of every item, so an item stays small
whatever the number of tables (a job may name thousands); ``rowCount`` stays, and the full
summary is one ``GET /v1/fetcher/{id}`` away.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from fetcher.services.records import JobRecord

__all__ = ["result_member", "stored_size", "summary_json"]


def stored_size(plaintext_bytes: int) -> int:
    """§6.3: bytes of ``base64(nonce(12) ‖ ciphertext ‖ tag(16))`` for a plaintext size."""
    return 4 * -(-(plaintext_bytes + 12 + 16) // 3)


def summary_json(
    *,
    size_bytes: int,
    plaintext_bytes: int,
    row_count: int,
    tables: Mapping[str, Mapping[str, int]],
) -> str:
    """The stored summary text (compact JSON, keys in this order)."""
    return json.dumps(
        {
            "sizeBytes": size_bytes,
            "plaintextBytes": plaintext_bytes,
            "rowCount": row_count,
            "tables": {ds: dict(counts) for ds, counts in tables.items()},
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def result_member(job: JobRecord, *, with_tables: bool = True) -> dict[str, object] | None:
    """§14.1 ``result`` of a job answer: ``None`` (member absent) unless the job is completed.

    ``expiresAt`` and ``expiredAt`` are always present and ``null`` until retention sets them.
    """
    if job.status != "completed" or job.result_path is None:
        return None
    member: dict[str, object] = {"path": job.result_path}
    if job.result_summary_json is not None:
        summary = json.loads(job.result_summary_json)
        member["sizeBytes"] = summary["sizeBytes"]
        member["plaintextBytes"] = summary["plaintextBytes"]
        member["rowCount"] = summary["rowCount"]
        if with_tables:
            member["tables"] = summary["tables"]
    if job.result_hmac is not None:
        member["hmac"] = job.result_hmac
    if job.result_key_version is not None:
        member["keyVersion"] = job.result_key_version
    member["expiresAt"] = None
    member["expiredAt"] = None
    return member
