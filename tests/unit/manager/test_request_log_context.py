"""Issue 11 logs: a line written while serving a connection route names the connection (and
the product, when the route takes ``X-Product-Name``), so ``grep <connectionId>`` finds it."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from fetcher.cli.logs import JsonFormatter
from fetcher.crypto import Redactor
from fetcher.services.log_context import current_log_context
from tests.unit.manager.conftest import Harness

C = "/v1/management/connections"


class Lines(logging.Handler):
    """The JSON lines the production formatter writes, collected in memory."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter(Redactor(), "test"))
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("fetcher")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


async def test_a_connection_test_failure_line_names_the_connection(
    h: Harness, lines: Lines
) -> None:
    created = await h.create_ok()
    h.db("pg_main").fail_on["connect"] = "connection to server at 10.0.0.1 failed"
    response = await h.client.post(f"{C}/{created['id']}/test")
    assert response.json()["status"] == "failure"
    [line] = [x for x in lines.lines if "pg_main" in str(x["event"])]
    assert line["connection_id"] == created["id"]
    assert line["request_id"] == response.headers["x-request-id"]


async def test_the_bound_values_end_with_their_request(h: Harness, lines: Lines) -> None:
    """The ASGI test client runs the app in this task: what a route binds must be gone when
    its request ends, or the next request's lines would name the wrong connection."""
    created = await h.create_ok()
    await h.client.get(f"{C}/{created['id']}", headers={"X-Product-Name": "acme"})
    assert "connection_id" not in current_log_context()
    assert "product" not in current_log_context()
