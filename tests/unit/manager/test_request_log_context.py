"""Issue 11 logs: a line written while serving a connection route names the connection (and
the product, when the route takes ``X-Product-Name``), so ``grep <connectionId>`` finds it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fetcher.services.log_context import current_log_context
from tests.json_lines import JsonLines, json_lines
from tests.unit.manager.conftest import Harness

C = "/v1/management/connections"


@pytest.fixture
def lines() -> Iterator[JsonLines]:
    with json_lines("fetcher") as collected:
        yield collected


async def test_a_connection_test_failure_line_names_the_connection(
    h: Harness, lines: JsonLines
) -> None:
    created = await h.create_ok()
    h.db("pg_main").fail_on["connect"] = "connection to server at 10.0.0.1 failed"
    response = await h.client.post(f"{C}/{created['id']}/test")
    assert response.json()["status"] == "failure"
    [line] = [x for x in lines.lines if "pg_main" in str(x["event"])]
    assert line["connection_id"] == created["id"]
    assert line["request_id"] == response.headers["x-request-id"]


async def test_the_bound_values_end_with_their_request(h: Harness, lines: JsonLines) -> None:
    """The ASGI test client runs the app in this task: what a route binds must be gone when
    its request ends, or the next request's lines would name the wrong connection."""
    created = await h.create_ok()
    await h.client.get(f"{C}/{created['id']}", headers={"X-Product-Name": "acme"})
    assert "connection_id" not in current_log_context()
    assert "product" not in current_log_context()
