"""The machine's servers as the benchmarks use them: addresses, a Manager/Worker pair's
environment, and leaving the shared servers as they were (a run's S3 objects, work queue and
events exchange deleted afterwards).

The PostgreSQL server is ``FETCHER_BENCH_POSTGRES_DSN`` (default the shared one on
127.0.0.1:5432, trust auth); the S3 server is the tests' (``FETCHER_TEST_S3_*``, default the
loopback SeaweedFS on 127.0.0.1:8333); RabbitMQ is guest/guest on 127.0.0.1:5672.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import aio_pika

ADMIN = os.environ.get(
    "FETCHER_BENCH_POSTGRES_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test"
)
#: The ``fetcher`` command of this interpreter's environment.
FETCHER = str(Path(sys.executable).with_name("fetcher"))
#: ``APP_ENC_KEY`` of every process a benchmark starts (a fixed test key, never a real one).
KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="

S3_ENDPOINT = os.environ.get("FETCHER_TEST_S3_ENDPOINT", "http://127.0.0.1:8333")
S3_BUCKET = os.environ.get("FETCHER_TEST_S3_BUCKET", "fetcher-test")
S3_ACCESS_KEY = os.environ.get("FETCHER_TEST_S3_ACCESS_KEY", "fetcher-test-access")
S3_SECRET_KEY = os.environ.get("FETCHER_TEST_S3_SECRET_KEY", "fetcher-test-secret-0123456789")


def bench_prefix(suffix: str) -> str:
    """The object-key prefix of one bench run's Worker (``OBJECT_STORAGE_KEY_PREFIX``): every
    object it stores is under it, and :func:`delete_s3_prefix` removes them afterwards."""
    return f"fetcher-bench-{suffix}"


def delete_s3_prefix(prefix: str) -> int:
    """Leave the shared test bucket as it was: delete every object under ``prefix/`` and abort
    any unfinished multipart upload there; returns the number of objects deleted."""
    import boto3  # type: ignore[import-untyped]  # boto3 comes with aioboto3 (the s3 extra)
    from botocore.config import Config  # type: ignore[import-untyped]

    client = boto3.client(
        "s3",
        endpoint_url=S3_ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id=S3_ACCESS_KEY,
        aws_secret_access_key=S3_SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}),
    )
    deleted = 0
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=S3_BUCKET, Prefix=f"{prefix}/"
    ):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=S3_BUCKET, Delete={"Objects": keys, "Quiet": True})
            deleted += len(keys)
    uploads = client.list_multipart_uploads(Bucket=S3_BUCKET, Prefix=f"{prefix}/")
    for upload in uploads.get("Uploads", []):
        client.abort_multipart_upload(
            Bucket=S3_BUCKET, Key=upload["Key"], UploadId=upload["UploadId"]
        )
    vacuum_s3_server()
    return deleted


def vacuum_s3_server() -> None:
    """Give the local SeaweedFS (``scripts/s3-server.sh``: master port = S3 port + 1000) its
    space and volume slots back after the bench deleted its objects. Deleted bytes stay in its
    64 MB volumes until a vacuum, and emptied volumes keep their slot until deleted: a dozen
    500 k-row runs (~2.5 GB written each) used up all 200 slots, after which every write to a
    new bucket, then to any bucket, failed with ``InternalError`` (2026-12-01). Best effort."""
    parsed = urllib.parse.urlsplit(S3_ENDPOINT)
    if parsed.hostname not in ("127.0.0.1", "localhost") or parsed.port is None:
        return
    master = f"{parsed.hostname}:{parsed.port + 1000}"
    try:
        url = f"http://{master}/vol/vacuum?garbageThreshold=0.1"
        with urllib.request.urlopen(url, timeout=300) as response:
            response.read()
        weed = Path(sys.executable).with_name("weed")
        if weed.exists():
            subprocess.run(
                [str(weed), "shell", f"-master={master}"],
                input="lock\nvolume.deleteEmpty -quietFor=1s -force\nunlock\n",
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"  (SeaweedFS clean-up failed: {exc})", flush=True)


def distributed_env(meta_db: str, suffix: str) -> dict[str, str]:
    """The metadata store, broker and S3 variables of a bench Manager/Worker pair: the scratch
    metadata database ``meta_db``, a work queue and events exchange named with ``suffix``, and
    the test S3 server (``scripts/s3-server.sh``), with the objects under
    :func:`bench_prefix` (``suffix``) so that they can be deleted after the run."""
    return {
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{meta_db}",
        "RABBITMQ_HOST": "127.0.0.1",
        "RABBITMQ_FETCHER_WORK_QUEUE": f"fetcher.bench.{suffix}",
        "RABBITMQ_JOB_EVENTS_EXCHANGE": f"fetcher.bench.events.{suffix}",
        "STREAMING_ENABLED": "true",
        "STREAMING_CLOUDEVENTS_SOURCE": "//lerian.fetcher/bench",
        "OBJECT_STORAGE_ENDPOINT": S3_ENDPOINT,
        "OBJECT_STORAGE_BUCKET": S3_BUCKET,
        "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "OBJECT_STORAGE_SECRET_KEY": S3_SECRET_KEY,
        "OBJECT_STORAGE_USE_PATH_STYLE": "true",
        "OBJECT_STORAGE_KEY_PREFIX": bench_prefix(suffix),
    }


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def delete_broker_objects(queue: str, exchange: str) -> None:
    """Leave the shared broker as it was: a run's work queue and events exchange go."""
    connection = await aio_pika.connect("amqp://guest:guest@127.0.0.1:5672/")
    async with connection:
        channel = await connection.channel()
        await channel.queue_delete(queue)
        await channel.exchange_delete(exchange)
