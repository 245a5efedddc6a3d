"""compose.yaml's one-shot `s3-init`: create the result bucket when it does not exist yet.

Fetcher never creates buckets (a Worker's /readyz checks the bucket with HeadBucket), and
SeaweedFS starts with none. Runs with the Fetcher image's Python (boto3 comes with the S3
extra) and reads the same variables as Fetcher: OBJECT_STORAGE_ENDPOINT, _BUCKET, _REGION,
_ACCESS_KEY_ID and the secret key from OBJECT_STORAGE_SECRET_KEY_FILE (or _SECRET_KEY).
Exits 0 when the bucket exists afterwards, so a rerun is harmless.
"""

import os
import sys
import time
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

#: Seconds of retries while the S3 gateway does not accept connections yet (it may pass its
#: health check a moment before it serves requests). An S3 error answer is not retried.
ATTEMPTS = 30


def _secret_key(env: dict[str, str]) -> str:
    path = env.get("OBJECT_STORAGE_SECRET_KEY_FILE", "")
    return Path(path).read_text().strip() if path else env.get("OBJECT_STORAGE_SECRET_KEY", "")


def _ensure(client: Any, bucket: str) -> str:
    """Create ``bucket`` unless HeadBucket finds it; what was done, for the log."""
    try:
        client.head_bucket(Bucket=bucket)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket"):
            raise
        client.create_bucket(Bucket=bucket)
        client.head_bucket(Bucket=bucket)
        return f"created bucket {bucket}"
    return f"bucket {bucket} exists"


def main() -> int:
    env = dict(os.environ)
    bucket = env["OBJECT_STORAGE_BUCKET"]
    client = boto3.client(
        "s3",
        endpoint_url=env["OBJECT_STORAGE_ENDPOINT"],
        region_name=env.get("OBJECT_STORAGE_REGION", "us-east-1"),
        aws_access_key_id=env["OBJECT_STORAGE_ACCESS_KEY_ID"],
        aws_secret_access_key=_secret_key(env),
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    failure = "no attempt"
    for _ in range(ATTEMPTS):
        try:
            print(_ensure(client, bucket), flush=True)
            return 0
        except ClientError as exc:  # an answer: wrong credentials, a forbidden name, …
            failure = str(exc.response.get("Error", {}).get("Code", "ClientError"))
            break
        except BotoCoreError as exc:  # no answer yet
            failure = type(exc).__name__
            time.sleep(1)
    print(f"bucket {bucket} not created: {failure}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
