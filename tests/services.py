"""Where the real servers the tests use live, and what to do when one is missing.

On a developer machine a missing server skips its tests; in CI (``FETCHER_REQUIRE_SERVICES=1``,
set by ``.ci/run``) it fails them, so a broken set-up can never pass as green.
"""

from __future__ import annotations

import os

import pytest

POSTGRES_ADMIN_DSN = os.environ.get(
    "FETCHER_TEST_POSTGRES_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test"
)
MARIADB = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": "", "db": "test"}
RABBITMQ_URL = os.environ.get("FETCHER_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")


def services_required() -> bool:
    return os.environ.get("FETCHER_REQUIRE_SERVICES", "") == "1"


def service_missing(name: str, reason: object) -> None:
    """Fail (CI) or skip (laptop) a test whose server ``name`` cannot be reached."""
    message = f"{name} is not reachable: {reason}"
    if services_required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
