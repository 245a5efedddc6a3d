"""The §3.8 deduplication hash of a job request."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from fetcher.services.jsontext import compact_json

__all__ = ["canonical_request", "request_hash"]


def canonical_request(
    mapped_fields: Mapping[str, object],
    metadata: Mapping[str, object],
    *,
    filters: Mapping[str, object] | None = None,
    limits: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """§3.8 canonical object ``{"dataRequest": D, "metadata": M}``; empty parts are left out."""
    data_request: dict[str, object] = {"mappedFields": mapped_fields}
    if filters:
        data_request["filters"] = filters
    if limits:
        data_request["limits"] = limits
    return {"dataRequest": data_request, "metadata": metadata}


def request_hash(body_parts: Mapping[str, object]) -> str:
    """§3.8: SHA-256 (lower-case hex) of the canonical object serialized with sorted keys."""
    text = compact_json(body_parts, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
