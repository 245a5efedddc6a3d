"""The download route ``GET /v1/fetcher/{id}/result`` (contract §14.2) against reading the same
object from S3 directly, in the same run (issue 35).

1. Writes a real §6.3 object of about ``FETCHER_BENCH_DOWNLOAD_MIB`` MiB stored (default 250):
   a §5.4-shaped plaintext encrypted as it is generated, so nothing holds it whole; uploads it
   to the tests' S3 server under a bench prefix.
2. Starts a Manager alone (PostgreSQL metadata store, RabbitMQ, S3), creates a job (it stays
   ``pending``: no Worker) and marks it ``completed`` at that object in the metadata store, as
   a Worker would have.
3. Alternating ``FETCHER_BENCH_REPS`` times (default 2): the whole object through the route
   (httpx, streamed, 1 MiB reads) with the Manager's peak RSS (``VmHWM`` reset before each
   download) and CPU; then a direct ``GetObject`` of the same object (boto3, streamed, 1 MiB
   reads). Every download is checked byte for byte (SHA-256 against the stored object). One
   resumed download (the first half, then ``Range: bytes=<half>-`` with ``If-Range``) is
   checked too.

Prints MiB/s of each, their ratio, and the Manager's RSS before and at peak; writes
``bench/results/download-<stamp>.json``. Run: ``.venv/bin/python -m bench.download``.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]  # boto3 comes with aioboto3 (the s3 extra)
import httpx

from bench.support import (
    KEY,
    S3_ACCESS_KEY,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET_KEY,
    FetcherProcesses,
    bench_prefix,
    cpu_seconds,
    delete_s3_prefix,
    postgres_scalar,
    reset_peak,
    vm_hwm_mib,
    write_report,
)
from fetcher.crypto import HmacStream, KeySet, ObjectEncryptor

TARGET_MIB = int(os.environ.get("FETCHER_BENCH_DOWNLOAD_MIB", "250"))
REPS = int(os.environ.get("FETCHER_BENCH_REPS", "2"))
READ = 1 << 20


def generate(path: Path) -> tuple[str, str]:
    """Write the stored object; return (HMAC, SHA-256 of the stored bytes)."""
    keys = KeySet.from_text(KEY)
    encryptor, mac = ObjectEncryptor(keys.storage), HmacStream(keys.external_hmac)
    digest = hashlib.sha256()
    plaintext_target = TARGET_MIB * 1024 * 1024 * 3 // 4
    row = b'      {"id": 1, "email": "user@example.com", "note": "' + b"x" * 120 + b'"}'
    with path.open("wb") as out:

        def put(data: bytes) -> None:
            mac.update(data)
            sealed = encryptor.update(data)
            digest.update(sealed)
            out.write(sealed)

        put(b'{\n  "bench": {\n    "rows": [\n')
        written, chunk = 0, b",\n".join([row] * 4096) + b",\n"
        while written < plaintext_target:
            put(chunk)
            written += len(chunk)
        put(row + b"\n    ]\n  }\n}")
        tail = encryptor.finalize()
        digest.update(tail)
        out.write(tail)
    return mac.hexdigest(), digest.hexdigest()


def post(url: str, body: object, headers: dict[str, str]) -> Any:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def completed_job(fetcher: FetcherProcesses, key: str, mac: str) -> str:
    """A pending job, then marked completed at ``key`` as the Worker's CAS would."""
    fetcher.connect_postgres("bench_src", "test")
    accepted = post(
        f"{fetcher.base}/v1/fetcher",
        {
            "dataRequest": {"mappedFields": {"bench_src": {"public.t": ["id"]}}},
            "metadata": {"source": "bench", "correlationId": secrets.token_hex(8)},
        },
        {},
    )
    job_id = str(accepted["jobId"])
    postgres_scalar(
        fetcher.metadata_database,
        "UPDATE jobs SET status = 'completed', dedup_active = false,"
        f" result_path = '{key}', result_hmac = '{mac}', result_key_version = '1',"
        f" completed_at = now(), started_at = now() WHERE id = '{job_id}' RETURNING id",
    )
    return job_id


def through_route(url: str, pid: int) -> dict[str, float | str]:
    reset_peak(pid)
    base_rss, cpu = vm_hwm_mib(pid), cpu_seconds(pid)
    digest, size = hashlib.sha256(), 0
    started = time.perf_counter()
    with httpx.stream("GET", url, timeout=120) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes(READ):
            digest.update(chunk)
            size += len(chunk)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "mib_per_s": size / 2**20 / seconds,
        "manager_rss_before_mib": base_rss,
        "manager_peak_rss_mib": vm_hwm_mib(pid),
        "manager_cpu_s": cpu_seconds(pid) - cpu,
        "sha256": digest.hexdigest(),
    }


def from_s3(client: Any, key: str) -> dict[str, float | str]:
    digest, size = hashlib.sha256(), 0
    started = time.perf_counter()
    body = client.get_object(Bucket=S3_BUCKET, Key=key)["Body"]
    for chunk in body.iter_chunks(READ):
        digest.update(chunk)
        size += len(chunk)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "mib_per_s": size / 2**20 / seconds, "sha256": digest.hexdigest()}


def resumed(url: str, size: int) -> str:
    """The first half, then the rest with a range: the SHA-256 of the joined bytes."""
    digest = hashlib.sha256()
    half = size // 2
    with httpx.stream("GET", url, headers={"Range": f"bytes=0-{half - 1}"}, timeout=120) as first:
        assert first.status_code == 206, first.status_code
        etag = first.headers["etag"]
        for chunk in first.iter_bytes(READ):
            digest.update(chunk)
    headers = {"Range": f"bytes={half}-", "If-Range": etag}
    with httpx.stream("GET", url, headers=headers, timeout=120) as rest:
        assert rest.status_code == 206, rest.status_code
        for chunk in rest.iter_bytes(READ):
            digest.update(chunk)
    return digest.hexdigest()


def main() -> int:
    prefix = bench_prefix(f"download-{secrets.token_hex(4)}")
    key = f"{prefix}/external-data/bench-download.json"
    client = boto3.client(
        "s3",
        endpoint_url=S3_ENDPOINT,
        aws_access_key_id=S3_ACCESS_KEY,
        aws_secret_access_key=S3_SECRET_KEY,
        region_name="us-east-1",
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "object"
        mac, stored_sha = generate(path)
        size = path.stat().st_size
        client.upload_file(str(path), S3_BUCKET, key)
    print(f"object: {size / 2**20:.1f} MiB stored", flush=True)
    route_runs: list[dict[str, float | str]] = []
    s3_runs: list[dict[str, float | str]] = []
    try:
        with FetcherProcesses("manager") as fetcher:
            job_id = completed_job(fetcher, key, mac)
            url = f"{fetcher.base}/v1/fetcher/{job_id}/result"
            for rep in range(REPS):
                route_runs.append(through_route(url, fetcher.manager_pid))
                s3_runs.append(from_s3(client, key))
                print(f"  rep {rep + 1}: route {route_runs[-1]}, s3 {s3_runs[-1]}", flush=True)
            resumed_sha = resumed(url, size)
    finally:
        delete_s3_prefix(prefix)
    assert all(r["sha256"] == stored_sha for r in route_runs + s3_runs), "bytes differ"
    assert resumed_sha == stored_sha, "the resumed download differs"
    route = statistics.median(float(r["mib_per_s"]) for r in route_runs)
    direct = statistics.median(float(r["mib_per_s"]) for r in s3_runs)
    peak = max(float(r["manager_peak_rss_mib"]) for r in route_runs)
    before = min(float(r["manager_rss_before_mib"]) for r in route_runs)
    print(
        f"route {route:.0f} MiB/s, S3 directly {direct:.0f} MiB/s (route/S3 {route / direct:.2f}); "
        f"Manager RSS {before:.0f} MiB before, {peak:.0f} MiB at peak; resumed download verified"
    )
    write_report(
        "download",
        {
            "stored_mib": size / 2**20,
            "route": route_runs,
            "s3_direct": s3_runs,
            "route_mib_per_s": route,
            "s3_mib_per_s": direct,
            "manager_rss_before_mib": before,
            "manager_peak_rss_mib": peak,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
