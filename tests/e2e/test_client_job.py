"""The typed client drives a whole job against the real stack — create a connection, submit,
wait, open the verified result — in a few lines of user code, with PostgreSQL and S3 (issue 9;
docs/events.md's own blocks, on a local folder, run in tests/e2e/test_doc_snippets.py)."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from fetcher.client import AsyncFetcherClient, ConflictError, NotFoundError
from fetcher.consumer import ConsumerKeys, S3Source, open_result
from tests.e2e.conftest import E2E
from tests.e2e.harness import PRODUCT, Database, Stack, encode_rows
from tests.services import S3_ACCESS_KEY, S3_ENDPOINT, S3_SECRET_KEY

pytestmark = E2E


async def user_code(
    url: str, name: str, src: Database, keys: ConsumerKeys, s3: S3Source
) -> tuple[Any, Any, list[dict[str, Any]]]:
    """What a user writes against PostgreSQL and S3."""
    # --- user code -----------------------------------------------------------------------
    async with AsyncFetcherClient(url) as api, s3:
        await api.create_connection(
            {"configName": name, "type": "POSTGRESQL", "host": src.host, "port": src.port,
             "databaseName": src.name, "userName": "postgres", "password": "x"},
            product="payments",
        )  # fmt: skip
        mapped = {name: {"public.accounts": ["id", "email"]}}
        submitted = await api.submit(mapped, metadata={"source": "payments"})
        job = await api.wait(submitted.job_id, timeout=60)
        with await open_result(job, s3, keys) as result:
            rows = [row for _, _, row in result.rows()]
    # --- end of user code ----------------------------------------------------------------
    return submitted, job, rows


async def test_client_drives_a_whole_job(stack: Stack) -> None:
    name, src = f"pg_client_{secrets.token_hex(3)}", stack.source
    keys = ConsumerKeys.from_hex(
        external=stack.keys.external.hex(), storage=stack.keys.storage.hex()
    )
    s3 = S3Source(
        stack.results.bucket,
        endpoint_url=S3_ENDPOINT,
        access_key_id=S3_ACCESS_KEY,
        secret_access_key=S3_SECRET_KEY,
    )
    async with stack.launcher.running_worker():
        submitted, job, rows = await user_code(stack.manager.base_url, name, src, keys, s3)
    assert job["status"] == "completed", job
    assert not submitted.duplicate
    columns, source_rows = src.query("SELECT id, email FROM public.accounts")
    assert sorted(rows, key=lambda r: r["id"]) == sorted(
        encode_rows(columns, source_rows), key=lambda r: r["id"]
    )


async def test_client_errors_are_typed_fet_errors(stack: Stack) -> None:
    async with AsyncFetcherClient(stack.manager.base_url) as api:
        with pytest.raises(NotFoundError) as missing:
            await api.get_job("0190a1b2-0000-7000-8000-00000000dead")
        assert (missing.value.status, missing.value.code) == (404, "FET-1001")
        assert missing.value.title == "Entity Not Found"
        page = await api.list_connections(product=PRODUCT)
        existing = next(c for c in page["items"] if c["configName"] == "pg_src")
        with pytest.raises(ConflictError) as taken:
            await api.assign_connection(existing["id"], product="other")
        assert taken.value.code == "FET-1015"
