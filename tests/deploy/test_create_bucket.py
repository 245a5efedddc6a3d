"""compose.yaml's `s3-init` (deploy/compose/create-bucket.py) against the real S3 server of
the test suite: it creates a missing bucket, and a rerun on the existing bucket succeeds."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.layout import ROOT
from tests.services import S3_ACCESS_KEY, S3_ENDPOINT, S3_SECRET_KEY, s3_test_client

pytestmark = pytest.mark.integration

SCRIPT = ROOT / "deploy" / "compose" / "create-bucket.py"


def _create(bucket: str, secret_file: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "OBJECT_STORAGE_ENDPOINT": S3_ENDPOINT,
        "OBJECT_STORAGE_BUCKET": bucket,
        "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "OBJECT_STORAGE_SECRET_KEY_FILE": str(secret_file),
    }
    return subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [sys.executable, str(SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_creates_the_bucket_once(tmp_path: Path) -> None:
    secret_file = tmp_path / "s3_secret_key"
    secret_file.write_text(S3_SECRET_KEY + "\n")
    bucket = f"deploy-init-{secrets.token_hex(4)}"
    with s3_test_client() as client:
        try:
            first = _create(bucket, secret_file)
            assert first.returncode == 0, first.stderr
            assert first.stdout.strip() == f"created bucket {bucket}"
            client.head_bucket(Bucket=bucket)
            again = _create(bucket, secret_file)
            assert again.returncode == 0, again.stderr
            assert again.stdout.strip() == f"bucket {bucket} exists"
        finally:
            client.delete_bucket(Bucket=bucket)


def test_a_wrong_secret_fails_without_showing_it(tmp_path: Path) -> None:
    secret_file = tmp_path / "s3_secret_key"
    secret_file.write_text("not-the-secret-0123456789\n")
    with s3_test_client():
        result = _create(f"deploy-init-{secrets.token_hex(4)}", secret_file)
    assert result.returncode == 1
    assert result.stderr.endswith("not created: 403\n")  # HeadBucket answers have no body
    assert "not-the-secret" not in result.stdout + result.stderr
