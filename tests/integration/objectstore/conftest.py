"""A fresh bucket per test session on the S3 server started by ``scripts/s3-server.sh``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from fetcher.adapters.objectstore.s3 import S3ObjectStore
from tests.services import (
    S3_ACCESS_KEY,
    S3_ENDPOINT,
    S3_SECRET_KEY,
    fresh_bucket,
    s3_test_client,
)


@pytest.fixture(scope="session")
def s3_admin() -> Iterator[Any]:
    """A synchronous boto3 client for set-up and inspection (ListMultipartUploads, HeadObject)."""
    with s3_test_client() as client:
        yield client


@pytest.fixture(scope="session")
def s3_bucket(s3_admin: Any) -> Iterator[str]:
    """A brand-new bucket, emptied and deleted when the session ends."""
    with fresh_bucket(s3_admin, "fetcher-test") as name:
        yield name


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
