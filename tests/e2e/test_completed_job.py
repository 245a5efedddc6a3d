"""A job that completes, seen as a consumer sees it: the ``job.completed`` message (§8.1–§8.5),
the stored object (§6.3, §5.4) and the job document (§4.6), cross-checked with the source."""

from __future__ import annotations

import json

from tests.e2e.conftest import E2E, SOURCE_CONFIG
from tests.e2e.harness import (
    MS_TIMESTAMP,
    PRODUCT,
    Stack,
    assert_envelope,
    decrypt_result_object,
    encode_rows,
    hmac_hex,
    json_pairs,
    keys_of,
    unique,
)

pytestmark = E2E

ACCOUNT_FIELDS = [
    "id",
    "email",
    "balance",
    "active",
    "opened_on",
    "created_at",
    "external_ref",
    "score",
    "profile",
]
#: §3.4: eq ORs its values; the date-only second ``between`` value means "< next day 00:00".
ACCOUNT_FILTER = {
    "active": {"eq": [True]},
    "created_at": {"between": ["2026-01-01", "2026-01-31"]},
}
PAYLOAD_KEYS = ["job_id", "status", "metadata", "result", "execution_time_ms", "completed_at"]
RESULT_KEYS = ["path", "size_bytes", "row_count", "format", "hmac", "integrity", "protection"]


async def test_completed_job_event_object_and_rows(stack: Stack) -> None:
    """Proves the whole success path: every §8.4 header and §8.1 property of the published
    ``job.completed``, the §8.2 key order of the raw body, the §8.5 signature under the
    ``derive-key`` external key, and that the object at ``result.path`` decrypts with the
    ``derive-key --purpose storage`` key to a §5.4 document whose HMAC, size and row count
    match the event and the job, and whose rows equal a direct SQL query (filter included)."""
    metadata = {"source": PRODUCT, "correlationId": unique("happy"), "batch": 7, "note": "café ✓"}
    mapped = {SOURCE_CONFIG: {"public.accounts": ACCOUNT_FIELDS, "ledger.entries": ["*"]}}
    filters = {SOURCE_CONFIG: {"accounts": ACCOUNT_FILTER}}

    async with stack.launcher.running_worker():
        job_id = await stack.api.submit(mapped, filters=filters, metadata=metadata)
        event = await stack.broker.collector.wait_for(job_id, "job.completed")
        job = await stack.api.wait_terminal(job_id)

    # §8.1, §8.4, §8.5: properties, headers, signature.
    ce_time = assert_envelope(stack, event, "completed")

    # §8.2: the raw bytes are compact JSON with keys in exactly the contract order.
    pairs = json_pairs(event.body)
    assert keys_of(pairs) == PAYLOAD_KEYS
    fields = dict(pairs)
    assert keys_of(fields["metadata"]) == list(metadata)
    result_pairs = fields["result"]
    assert keys_of(result_pairs) == RESULT_KEYS
    assert keys_of(dict(result_pairs)["integrity"]) == ["algorithm", "signature"]
    assert keys_of(dict(result_pairs)["protection"]) == ["encrypted", "applied_by", "mode"]
    payload = event.payload
    result = payload["result"]
    assert payload["job_id"] == job_id
    assert payload["status"] == "completed"
    assert payload["metadata"] == metadata
    assert result["path"] == f"external-data/{job_id}.json"
    assert result["format"] == "json"
    assert result["integrity"] == {"algorithm": "HMAC-SHA256", "signature": result["hmac"]}
    assert result["protection"] == {
        "encrypted": True,
        "applied_by": "adapter",
        "mode": "adapter-managed",
    }
    assert isinstance(payload["execution_time_ms"], int)
    assert payload["execution_time_ms"] >= 0

    # §4.6: the job agrees with the event.
    assert job["status"] == "completed"
    assert job["resultPath"] == result["path"]
    assert job["resultHmac"] == result["hmac"]
    assert job["completedAt"] == payload["completed_at"]
    assert MS_TIMESTAMP.fullmatch(job["completedAt"])
    assert ce_time >= job["completedAt"], "ce-time is the emission time, after the commit"

    # §6.3: decrypt the stored object with the consumer's storage key and verify its HMAC.
    # (Content-Type is not checked: SeaweedFS replaces application/octet-stream by the type
    # it guesses from the ``.json`` extension.)
    plaintext = decrypt_result_object(stack.keys.storage, stack.results.read(result["path"]))
    assert hmac_hex(stack.keys.external, plaintext) == result["hmac"]
    assert result["size_bytes"] == len(plaintext)

    # §5.4: two-space indentation, sorted keys, no trailing newline, minimal escaping.
    document = json.loads(plaintext)
    canonical = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    assert plaintext == canonical.encode()

    # §5.1–§5.3: the rows are those of a direct query, values encoded as the contract says.
    columns, rows = stack.source.query(
        f"SELECT {', '.join(ACCOUNT_FIELDS)} FROM public.accounts WHERE active = true"
        " AND created_at >= '2026-01-01T00:00:00Z' AND created_at < '2026-02-01T00:00:00Z'"
    )
    expected_accounts = encode_rows(columns, rows)
    # Rows 2 and 4 (2026-01-31 23:59:59.5): the end-of-day rule; 5 (2026-02-01) is out.
    assert sorted(r["id"] for r in expected_accounts) == [2, 4]
    columns, rows = stack.source.query("SELECT * FROM ledger.entries")
    expected_entries = encode_rows(columns, rows)
    assert list(document) == [SOURCE_CONFIG]
    assert sorted(document[SOURCE_CONFIG]) == ["accounts", "ledger.entries"]
    by_id = sorted(document[SOURCE_CONFIG]["accounts"], key=lambda r: r["id"])
    assert by_id == sorted(expected_accounts, key=lambda r: r["id"])
    entries = sorted(document[SOURCE_CONFIG]["ledger.entries"], key=lambda r: r["entry_id"])
    assert entries == sorted(expected_entries, key=lambda r: r["entry_id"])
    assert result["row_count"] == len(expected_accounts) + len(expected_entries)

    # §2.12: the feed holds the same event once, with the stored body.
    feed = await stack.api.feed_items(job_id)
    assert [(i["routingKey"], i["data"]) for i in feed] == [("job.completed", payload)]
    assert feed[0]["headers"]["ce-id"] == f"fetcher.job.completed.{job_id}"
    assert len(stack.broker.collector.for_job(job_id)) == 1
