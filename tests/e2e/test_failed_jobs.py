"""Jobs that fail after the claim (§4.3, §4.5): each ends in exactly one ``job.failed`` event
with the contract's text, and no object at ``external-data/<id>.json``."""

from __future__ import annotations

import re

from tests.e2e.conftest import E2E, SOURCE_CONFIG, SOURCE_PASSWORD
from tests.e2e.harness import (
    PRODUCT,
    DatabaseFactory,
    Stack,
    assert_failed_once,
    free_port,
    unique,
)

pytestmark = E2E

SCHEMA_INVALID = "extraction request failed schema validation: "


async def run_to_failure(stack: Stack, job_id: str, **worker_env: str) -> None:
    """Let a Worker run ``job_id`` to its ``job.failed`` event, then stop it (SIGTERM drains
    the relay, so every event it would ever send has been sent)."""
    async with stack.launcher.running_worker(**worker_env):
        await stack.broker.collector.wait_for(job_id, "job.failed")


async def test_unknown_table_fails_the_job(stack: Stack) -> None:
    """A table the datasource does not have fails the job with the §4.5 validation text; a
    caller's ``metadata.error`` is replaced in place (§3.1, §8.3)."""
    metadata = {"source": PRODUCT, "error": "caller value", "correlationId": unique("t")}
    job_id = await stack.api.submit(
        {SOURCE_CONFIG: {"public.missing_table": ["id"]}}, metadata=metadata
    )
    await run_to_failure(stack, job_id)
    assert list((await stack.api.job(job_id))["metadata"]) == list(metadata)
    await assert_failed_once(
        stack,
        job_id,
        f"{SCHEMA_INVALID}table 'public.missing_table' not found in datasource '{SOURCE_CONFIG}'",
    )


async def test_unknown_fields_are_all_named(stack: Stack) -> None:
    """Every unknown field of a table is listed, in the order requested (§3.2, §4.5)."""
    fields = ["id", "nope_b", "email", "nope_a", "nope_c"]
    job_id = await stack.api.submit({SOURCE_CONFIG: {"public.accounts": fields}})
    await run_to_failure(stack, job_id)
    await assert_failed_once(
        stack,
        job_id,
        f"{SCHEMA_INVALID}unknown fields for table 'public.accounts' in datasource "
        f"'{SOURCE_CONFIG}': nope_b, nope_a, nope_c",
    )


async def test_filter_value_of_the_wrong_type_fails_the_job(stack: Stack) -> None:
    """``gt ["abc"]`` on an integer column passes the Manager (shape only) and fails the job
    in the Worker with ``invalid filter value`` (§3.4 binding rules)."""
    job_id = await stack.api.submit(
        {SOURCE_CONFIG: {"public.accounts": ["id", "email"]}},
        filters={SOURCE_CONFIG: {"accounts": {"id": {"gt": ["abc"]}}}},
    )
    await run_to_failure(stack, job_id)
    pattern = re.escape(SCHEMA_INVALID) + (
        r"invalid filter value for field 'id' of table '(public\.)?accounts' "
        rf"in datasource '{SOURCE_CONFIG}': .+"
    )
    await assert_failed_once(stack, job_id, re.compile(pattern))


async def test_result_over_the_lowered_size_limit_fails_without_an_object(stack: Stack) -> None:
    """A result larger than ``limits.maxResultBytes`` fails with the exact §4.5 text and is
    never uploaded, not even as an unfinished multipart upload (§4.3 step 4, §5.5)."""
    job_id = await stack.api.submit(
        {SOURCE_CONFIG: {"public.accounts": ["*"]}}, limits={"maxResultBytes": 200}
    )
    await run_to_failure(stack, job_id)
    await assert_failed_once(
        stack, job_id, "extraction result exceeds the configured size limit (200 bytes)"
    )


async def test_unreachable_datasource_fails_without_leaking_its_address(
    stack: Stack, databases: DatabaseFactory
) -> None:
    """A datasource that passed the Manager's live test but is gone when the Worker connects
    fails the job with ``failed to connect to datasource '<ds>': <detail>``; the detail, the
    event and both processes' logs carry neither the address nor the password (§8.7, §9.2)."""
    doomed = databases.create("fetcher_e2e_gone")
    config = unique("pg_gone").replace("-", "_")
    await stack.api.create_connection(
        config, doomed.name, password=SOURCE_PASSWORD, host=doomed.host, port=doomed.port
    )
    job_id = await stack.api.submit({config: {"public.accounts": ["id"]}})
    databases.drop(doomed)  # after the Manager's live test, before any Worker runs

    async with stack.launcher.running_worker() as worker:
        await stack.broker.collector.wait_for(job_id, "job.failed")
    prefix = f"failed to connect to datasource '{config}': "
    text = await assert_failed_once(stack, job_id, re.compile(re.escape(prefix) + ".+"))

    address = f"{doomed.host}:{doomed.port}"
    event_body = stack.broker.collector.for_job(job_id)[0].body.decode()
    stack.launcher.assert_no_secrets(stack.manager)  # the Worker's logs were checked at exit
    for where, content in [
        ("job error", text),
        ("event", event_body),
        ("worker log", without_startup_line(worker.logs(), address)),
        ("manager log", without_startup_line(stack.manager.logs(), address)),
    ]:
        assert address not in content, where
        assert doomed.host not in content, where


def without_startup_line(logs: str, address: str) -> str:
    """The log without its start-up line, which names the process's own listening address
    (issue 33): on this machine the same loopback host as the vanished datasource's. That line
    must not hold the datasource's address either."""
    kept = []
    for line in logs.splitlines():
        if '"event": "fetcher started: ' in line:
            assert address not in line
            continue
        kept.append(line)
    return "\n".join(kept)


async def test_unreachable_object_storage_fails_without_an_object(stack: Stack) -> None:
    """A Worker whose S3 endpoint refuses connections fails the job with ``failed to store
    result: <detail>`` (redacted) and leaves nothing in the bucket (§4.3 step 5)."""
    job_id = await stack.api.submit({SOURCE_CONFIG: {"public.accounts": ["id", "email"]}})
    closed = f"http://127.0.0.1:{free_port()}"
    await run_to_failure(stack, job_id, OBJECT_STORAGE_ENDPOINT=closed)
    text = await assert_failed_once(stack, job_id, re.compile(r"failed to store result: .+"))
    assert "127.0.0.1" not in text


async def test_json_nested_too_deep_fails_the_job_in_the_worker(
    stack: Stack, databases: DatabaseFactory
) -> None:
    """A ``jsonb`` value nested 3,000 levels (PostgreSQL accepts it) fails the job with the
    §4.5 query text naming the column and the table, not ``internal error``; the Worker keeps
    running and completes the next job (issue 12, hardening; ``tests/e2e/test_deep_json.py``
    covers embedded mode, MariaDB and MongoDB)."""
    deep = databases.create(
        "fetcher_e2e_deep",
        "CREATE TABLE public.profiles (id integer, profile jsonb);"
        " INSERT INTO public.profiles VALUES (1, '{}'),"
        " (2, (repeat('[', 3000) || repeat(']', 3000))::jsonb);",
    )
    config = unique("pg_deep").replace("-", "_")
    await stack.api.create_connection(
        config, deep.name, password=SOURCE_PASSWORD, host=deep.host, port=deep.port
    )
    job_id = await stack.api.submit({config: {"public.profiles": ["id", "profile"]}})
    after = await stack.api.submit({SOURCE_CONFIG: {"public.accounts": ["id"]}})
    async with stack.launcher.running_worker() as worker:
        await stack.broker.collector.wait_for(job_id, "job.failed")
        await stack.broker.collector.wait_for(after, "job.completed")
    await assert_failed_once(
        stack,
        job_id,
        f"failed to query datasource '{config}': column 'profile' of table 'public.profiles' "
        "holds a JSON value nested deeper than 250 levels",
    )
    assert "Traceback" not in worker.logs()
