"""A fresh bucket per test session on the S3 server started by ``scripts/s3-server.sh``."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from fetcher.adapters.objectstore.s3 import S3ObjectStore
from tests.services import service_missing

S3_ENDPOINT = os.environ.get("FETCHER_TEST_S3_ENDPOINT", "http://127.0.0.1:8333")
S3_ACCESS_KEY = os.environ.get("FETCHER_TEST_S3_ACCESS_KEY", "fetcher-test-access")
S3_SECRET_KEY = os.environ.get("FETCHER_TEST_S3_SECRET_KEY", "fetcher-test-secret-0123456789")


def _admin_client() -> Any:
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    return boto3.client(
        "s3",
        endpoint_url=S3_ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id=S3_ACCESS_KEY,
        aws_secret_access_key=S3_SECRET_KEY,
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
            connect_timeout=3,
            read_timeout=30,
        ),
    )


@pytest.fixture(scope="session")
def s3_admin() -> Iterator[Any]:
    """A synchronous boto3 client for set-up and inspection (ListMultipartUploads, HeadObject)."""
    client = _admin_client()
    try:
        client.list_buckets()
    except Exception as exc:
        client.close()
        service_missing("S3 (scripts/s3-server.sh start)", exc)
        raise
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def s3_bucket(s3_admin: Any) -> Iterator[str]:
    """A brand-new bucket, emptied and deleted when the session ends."""
    name = f"fetcher-test-{secrets.token_hex(4)}"
    s3_admin.create_bucket(Bucket=name)
    try:
        yield name
    finally:
        uploads = s3_admin.list_multipart_uploads(Bucket=name).get("Uploads", [])
        for upload in uploads:
            s3_admin.abort_multipart_upload(
                Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"]
            )
        for item in s3_admin.list_objects_v2(Bucket=name).get("Contents", []):
            s3_admin.delete_object(Bucket=name, Key=item["Key"])
        s3_admin.delete_bucket(Bucket=name)


def make_store(bucket: str, **overrides: Any) -> S3ObjectStore:
    options: dict[str, Any] = {
        "endpoint": S3_ENDPOINT,
        "bucket": bucket,
        "region": "us-east-1",
        "access_key_id": S3_ACCESS_KEY,
        "secret_key": S3_SECRET_KEY,
        "path_style": True,
    }
    options.update(overrides)
    return S3ObjectStore(**options)


@pytest.fixture
async def s3_store(s3_bucket: str) -> AsyncIterator[S3ObjectStore]:
    async with make_store(s3_bucket, part_size=5 * 1024 * 1024) as store:
        yield store
