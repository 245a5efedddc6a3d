"""Where the real servers the tests use live, and what to do when one is missing.

On a developer machine a missing server skips its tests; in CI (``FETCHER_REQUIRE_SERVICES=1``,
set by ``.ci/run``) it fails them, so a broken set-up can never pass as green.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

POSTGRES_ADMIN_DSN = os.environ.get(
    "FETCHER_TEST_POSTGRES_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test"
)
MARIADB = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": "", "db": "test"}
RABBITMQ_URL = os.environ.get("FETCHER_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
#: The MongoDB wire server ``scripts/mongo-server.sh`` starts (nx-27017; no authentication).
MONGODB_HOST = os.environ.get("FETCHER_TEST_MONGODB_HOST", "127.0.0.1")
MONGODB_PORT = int(os.environ.get("FETCHER_TEST_MONGODB_PORT", "27018"))


def services_required() -> bool:
    return os.environ.get("FETCHER_REQUIRE_SERVICES", "") == "1"


def service_missing(name: str, reason: object) -> None:
    """Fail (CI) or skip (laptop) a test whose server ``name`` cannot be reached."""
    message = f"{name} is not reachable: {reason}"
    if services_required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


#: The S3 server ``scripts/s3-server.sh`` starts (``make test`` runs it around pytest).
S3_ENDPOINT = os.environ.get("FETCHER_TEST_S3_ENDPOINT", "http://127.0.0.1:8333")
S3_ACCESS_KEY = os.environ.get("FETCHER_TEST_S3_ACCESS_KEY", "fetcher-test-access")
S3_SECRET_KEY = os.environ.get("FETCHER_TEST_S3_SECRET_KEY", "fetcher-test-secret-0123456789")


@contextmanager
def s3_test_client() -> Iterator[Any]:
    """A synchronous boto3 client for set-up and inspection; fails (CI) or skips when the S3
    server does not answer."""
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    client = boto3.client(
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
    try:
        try:
            client.list_buckets()
        except Exception as exc:
            service_missing("S3 (scripts/s3-server.sh start)", exc)
            raise
        yield client
    finally:
        client.close()


@contextmanager
def fresh_bucket(client: Any, prefix: str) -> Iterator[str]:
    """A brand-new bucket; pending multipart uploads aborted, emptied and deleted at the end."""
    name = f"{prefix}-{secrets.token_hex(4)}"
    client.create_bucket(Bucket=name)
    try:
        yield name
    finally:
        for upload in client.list_multipart_uploads(Bucket=name).get("Uploads", []):
            client.abort_multipart_upload(
                Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"]
            )
        for item in client.list_objects_v2(Bucket=name).get("Contents", []):
            client.delete_object(Bucket=name, Key=item["Key"])
        client.delete_bucket(Bucket=name)


@asynccontextmanager
async def mongo_database(prefix: str) -> AsyncIterator[Any]:
    """A fresh database of the MongoDB wire server (``scripts/mongo-server.sh start``) through a
    pinged ``AsyncMongoClient`` (missing server: :func:`service_missing`); dropped at the end."""
    from pymongo import AsyncMongoClient

    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        host=MONGODB_HOST, port=MONGODB_PORT, directConnection=True, serverSelectionTimeoutMS=3000
    )
    name = f"{prefix}_{secrets.token_hex(4)}"
    try:
        try:
            await client.admin.command("ping")
        except Exception as exc:
            service_missing("MongoDB wire server (scripts/mongo-server.sh start)", exc)
            raise
        yield client[name]
    finally:
        await client.drop_database(name)
        await client.close()


def mongodb_connection(config_name: str, database: str) -> dict[str, object]:
    """The §2.5 body of a MONGODB connection (no credentials) to the wire server."""
    return {
        "configName": config_name,
        "type": "MONGODB",
        "host": MONGODB_HOST,
        "port": MONGODB_PORT,
        "databaseName": database,
    }


def mysql_connection(
    database: str, reader: str, password: str, config_name: str | None = None
) -> dict[str, object]:
    """The §2.5 body of a MYSQL connection to the machine's MariaDB, as ``reader``
    (``configName`` only when ``config_name`` is given)."""
    named = {} if config_name is None else {"configName": config_name}
    return {
        **named,
        "type": "MYSQL",
        "host": MARIADB["host"],
        "port": MARIADB["port"],
        "databaseName": database,
        "userName": reader,
        "password": password,
    }
