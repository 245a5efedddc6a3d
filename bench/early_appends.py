"""Issue 23, scope 3: finished spools appended while other datasources still run.

One job of three PostgreSQL datasources, in key order:

* ``a_tiny``: one row (it streams straight into the sink, §4.3.1, and is done at once);
* ``b_narrow``: the ledger's ``amount, id, status`` (``FETCHER_BENCH_ROWS``, default 500 000);
* ``c_wide``: the ledger without ``metadata``, the same rows: it runs longest (with
  ``metadata`` the document would pass the 256 MiB result ceiling).

It runs in-process through the Worker's own pieces: the SQL connectors, encrypted spools
(``SPOOL_MEMORY_BYTES`` default), and the encrypting sink (HMAC, AES-256-GCM, base64) into
the S3 test server's multipart upload (``FETCHER_BENCH_APPEND_STORE=local``: the local object
store instead). Two variants alternate, ``FETCHER_BENCH_REPS`` (default 3) times each:

* ``appends``: the engine as it is: ``b_narrow``'s spool goes to the sink as soon as
  ``a_tiny`` and ``b_narrow`` are done, while ``c_wide`` still runs;
* ``after``: ``runner._append_finished`` replaced by a no-op, so every spool is appended
  after the whole extraction (the engine before this change).

Reported per variant (medians): the job's wall time (extraction start to the object
stored), the time from the end of extraction to the object stored (what is left once the
last datasource is done), this process's CPU and the S3 server's. The document bytes of the
two variants are checked equal (their SHA-256). Needs PostgreSQL and, by default, the S3
server (``scripts/s3-server.sh start``). Run: ``.venv/bin/python -m bench.early_appends``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from typing import Any

import psycopg

from bench.support import (
    ADMIN,
    COLUMNS,
    NARROW,
    PG_LEDGER,
    S3_ACCESS_KEY,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET_KEY,
    bench_prefix,
    create_postgres,
    delete_s3_prefix,
    drop_postgres,
    postgres_descriptor,
    s3_server_pid,
    tree_cpu_seconds,
    write_report,
)
from fetcher.adapters.objectstore.local import LocalObjectStore
from fetcher.adapters.objectstore.s3 import MIN_PART_SIZE, S3ObjectStore
from fetcher.adapters.spool import EncryptedSpoolFactory
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.crypto import KeySet
from fetcher.engine import Engine, ExtractionRequest
from fetcher.engine import runner as engine_runner
from fetcher.engine.limits import DEFAULT_LIMITS
from fetcher.services.infrastructure import ObjectStore, ObjectWriter
from fetcher.services.jobs.extraction import _EncryptingSink

ROWS = int(os.environ.get("FETCHER_BENCH_ROWS", "500000"))
REPS = int(os.environ.get("FETCHER_BENCH_REPS", "3"))
STORE = os.environ.get("FETCHER_BENCH_APPEND_STORE", "s3")
SPOOL_MEMORY_BYTES = 8 * 1024 * 1024
WIDE = tuple(column for column in COLUMNS if column != "metadata")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def _appends(enabled: bool) -> Iterator[None]:
    """The engine as it is, or with every spool appended after the extraction."""
    original = engine_runner._append_finished

    async def after_extraction(*_args: object) -> None:
        return None

    if not enabled:
        engine_runner._append_finished = after_extraction  # type: ignore[assignment]
    try:
        yield
    finally:
        engine_runner._append_finished = original


def _request(job: str) -> ExtractionRequest:
    return ExtractionRequest(
        job_id=job,
        mapped_fields={
            "a_tiny": {"tiny": ("id",)},
            "b_narrow": {"ledger": NARROW},
            "c_wide": {"ledger": WIDE},
        },
    )


async def _job(store: ObjectStore, engine: Engine, database: str, key: str) -> dict[str, float]:
    """One job: its wall time, the time after extraction, this process's CPU, the document's
    size and SHA-256 (from the engine's result)."""
    connections = {
        name: postgres_descriptor(database, name) for name in ("a_tiny", "b_narrow", "c_wide")
    }
    keys = KeySet.from_master(b"\x01" * 32)
    extracted_at = 0.0

    def extracted() -> None:
        nonlocal extracted_at
        extracted_at = time.perf_counter()

    began, cpu = time.perf_counter(), _cpu()
    async with AsyncExitStack() as stack:

        async def open_writer() -> ObjectWriter:
            return await stack.enter_async_context(store.open_writer(key))

        opener: Callable[[], Awaitable[ObjectWriter]] = open_writer
        sink = _EncryptingSink(keys, opener, base64.b64encode)
        plan = await engine.plan(_request(key), connections)
        result = await engine.execute(plan, sink, on_extracted=extracted)
        await sink.finish()
    stored = time.perf_counter()
    return {
        "seconds": stored - began,
        "after_extraction_seconds": stored - extracted_at,
        "cpu_seconds": _cpu() - cpu,
        "bytes": result.size_bytes,
        "sha256": result.sha256,  # type: ignore[dict-item]
    }


async def _run(database: str) -> dict[str, Any]:
    registry = SqlConnectorRegistry()
    engine = Engine(
        registry, limits=DEFAULT_LIMITS, spools=EncryptedSpoolFactory(SPOOL_MEMORY_BYTES)
    )
    prefix = bench_prefix("appends")
    runs: dict[str, list[dict[str, Any]]] = {"appends": [], "after": []}
    s3_pid = s3_server_pid() if STORE == "s3" else None
    with tempfile.TemporaryDirectory(prefix="fetcher-bench-appends-") as directory:
        if STORE == "s3":
            store: Any = S3ObjectStore(
                endpoint=S3_ENDPOINT,
                bucket=S3_BUCKET,
                region="us-east-1",
                access_key_id=S3_ACCESS_KEY,
                secret_key=S3_SECRET_KEY,
                path_style=True,
                part_size=MIN_PART_SIZE,
            )
            await store.open()
        else:
            store = LocalObjectStore(directory)
        try:
            for rep in range(REPS + 1):  # the first pair warms the caches and is dropped
                for variant in ("appends", "after") if rep % 2 else ("after", "appends"):
                    s3_before = tree_cpu_seconds(s3_pid) if s3_pid else 0.0
                    with _appends(variant == "appends"):
                        figure = await _job(store, engine, database, f"{prefix}/{variant}-{rep}")
                    if s3_pid:
                        figure["s3_server_cpu_seconds"] = tree_cpu_seconds(s3_pid) - s3_before
                    print(f"  {variant:<8} {json.dumps(figure)}", flush=True)
                    if rep:
                        runs[variant].append(figure)
        finally:
            if STORE == "s3":
                await store.close()
                print(f"  ({delete_s3_prefix(prefix)} bench objects deleted from the test bucket)")
    return runs


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [run[key] for run in runs if key in run]
    return round(statistics.median(values), 3) if values else None


def main() -> None:
    tiny = "CREATE TABLE tiny (id integer); INSERT INTO tiny VALUES (1);"
    database = create_postgres("appends", PG_LEDGER.format(rows=ROWS) + tiny)
    try:
        # b and c scan the ledger at once: a synchronized scan would start one where the
        # other is, so the rows' order (and the document's digest) would change between jobs
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{database}" SET synchronize_seqscans = off'.encode())
        print(f"early appends: 3 datasources, {ROWS:,} ledger rows twice, store {STORE}")
        runs = asyncio.run(_run(database))
    finally:
        drop_postgres(database)
    digests = {run["sha256"] for variant in runs.values() for run in variant}
    assert len(digests) == 1, "the two variants wrote different documents"
    summary = {
        variant: {
            key: _median(figures, key)
            for key in (
                "seconds",
                "after_extraction_seconds",
                "cpu_seconds",
                "s3_server_cpu_seconds",
            )
        }
        for variant, figures in runs.items()
    }
    ratio = summary["after"]["seconds"] / summary["appends"]["seconds"]  # type: ignore[operator]
    print(json.dumps(summary, indent=2))
    print(f"  speed appends/after: {ratio:.2f}x")
    report = {"rows": ROWS, "store": STORE, "reps": REPS, "runs": runs, "summary": summary}
    write_report(f"early-appends-{STORE}", report)


if __name__ == "__main__":
    main()
