"""Embedded mode with a broker configured (§1.1, §9.3): one process runs the Manager API and
the Worker over SQLite and a local result folder, and still publishes signed CloudEvents on the
events exchange, exactly as a Worker deployment does."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import E2E, SOURCE_PASSWORD
from tests.e2e.harness import (
    ManagerApi,
    Stack,
    assert_envelope,
    decrypt_result_object,
    hmac_hex,
)

pytestmark = E2E


async def test_embedded_mode_publishes_signed_events_to_the_broker(
    stack: Stack, tmp_path: Path
) -> None:
    """An embedded process with ``RABBITMQ_HOST`` set: the job completes, its object lands in
    the local folder and decrypts with the storage key, and exactly one signed
    ``job.completed`` with every §8.4 header reaches the events exchange."""
    objects = tmp_path / "objects"
    embedded = await stack.launcher.manager(
        FETCHER_MODE="embedded",
        DATABASE_URL=f"sqlite:///{tmp_path / 'meta.db'}",
        OBJECT_STORAGE_ENDPOINT="",
        OBJECT_STORAGE_LOCAL_DIR=str(objects),
    )
    api = ManagerApi(stack.launcher.http, embedded.base_url)
    await api.create_connection(
        "pg_embedded",
        stack.source.name,
        password=SOURCE_PASSWORD,
        host=stack.source.host,
        port=stack.source.port,
    )
    job_id = await api.submit({"pg_embedded": {"public.accounts": ["id", "email"]}})
    event = await stack.broker.collector.wait_for(job_id, "job.completed")
    job = await api.wait_terminal(job_id)

    assert job["status"] == "completed", job
    assert_envelope(stack, event, "completed")
    assert [e.routing_key for e in stack.broker.collector.for_job(job_id)] == ["job.completed"]
    stored = (objects / str(job["resultPath"])).read_bytes()
    plaintext = decrypt_result_object(stack.keys.storage, stored)
    assert hmac_hex(stack.keys.external, plaintext) == job["resultHmac"]
    assert set(json.loads(plaintext)) == {"pg_embedded"}
    assert event.payload["result"]["hmac"] == job["resultHmac"]
