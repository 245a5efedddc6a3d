"""§8.7 "redacted once" and §13 "Worker redaction" / "Blocking work" across the layers.

* A connection test's driver text passes the redactor exactly once (not again in the log
  call, nor in the log formatter), with the connection's password and host known.
* A long text is redacted in a worker thread when async code asks (``redact_async``).
* The Worker's step 1 knows the address the SSRF pre-dial pinned: an address glued to word
  characters, which no pattern step can see, is still redacted.

The Manager and Worker worlds are the production composition over fakes (their fixtures are
imported from the manager and worker test packages).
"""

from __future__ import annotations

import json
import logging
import socket
import threading

import pytest

from fetcher.cli.logs import JsonFormatter
from fetcher.crypto import REDACTED, Redactor
from fetcher.crypto.redact import INLINE_LIMIT, LOG_REDACTED
from fetcher.services.connections import ssrf
from tests.unit.manager.conftest import Harness, h, make_harness
from tests.unit.worker.conftest import World, world

__all__ = ["h", "make_harness", "world"]  # fixtures used below

PINNED = "93.184.216.34"


@pytest.fixture
def redact_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every text :meth:`Redactor.redact` is given, with the thread it ran on."""
    calls: list[tuple[str, int]] = []
    original = Redactor.redact

    def spy(self: Redactor, text: str) -> str:
        calls.append((text, threading.get_ident()))
        return original(self, text)

    monkeypatch.setattr(Redactor, "redact", spy)
    return calls


async def test_a_connection_test_failure_is_redacted_once(
    h: Harness, redact_calls: list[tuple[str, int]], caplog: pytest.LogCaptureFixture
) -> None:
    created = await h.create_ok(password="Pa55-for-db1")
    detail = "FATAL: auth failed for Pa55-for-db1 at DB.EXAMPLE.COM:5432 (peer x_10.9.8.7_y)"
    h.db("pg_main").fail_on["connect"] = detail
    with caplog.at_level(logging.INFO):
        response = await h.client.post(f"/v1/management/connections/{created['id']}/test")
    assert response.json()["status"] == "failure"
    passes = [text for text, _ in redact_calls if "auth failed" in text]
    assert passes == [detail], passes  # once: not again by the log call or the formatter
    (record,) = [r for r in caplog.records if "connection test failed" in r.getMessage()]
    logged = record.getMessage()
    assert "Pa55-for-db1" not in logged
    assert "DB.EXAMPLE.COM" not in logged
    assert f"for {REDACTED} at {REDACTED} (peer" in logged
    assert getattr(record, "redacted", False) is True


def _format(message: str, **extra: object) -> str:
    formatter = JsonFormatter(Redactor(secrets=["process-Secret-1"]), "test")
    record = logging.LogRecord("x", logging.INFO, __file__, 1, message, None, None)
    record.__dict__.update(extra)
    return str(json.loads(formatter.format(record))["event"])


def test_the_formatter_redacts_what_was_not_redacted_and_only_that() -> None:
    text = "process-Secret-1 at 10.0.0.5"
    assert _format(text) == f"{REDACTED} at {REDACTED}"
    assert _format(text, **LOG_REDACTED) == text  # already redacted where it arose


async def test_long_texts_are_redacted_off_the_event_loop(
    redact_calls: list[tuple[str, int]],
) -> None:
    loop_thread = threading.get_ident()
    redactor = Redactor()
    short, long = "x" * INLINE_LIMIT, "a." * (32 * 1024)
    assert await redactor.redact_async(short) == short
    assert await redactor.redact_async(long) == redactor.redact(long)
    threads = dict(redact_calls[:2])
    assert threads[short] == loop_thread
    assert threads[long] != loop_thread


async def test_the_worker_redacts_the_pinned_address(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def dns(host: str, port: int | None) -> list[str]:
        if host != world.connection.host:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [PINNED, "2606:2800:220:1::1"]

    job_id = await world.submit({"pg": {"accounts": ["id"]}})  # its live test passes
    monkeypatch.setattr(ssrf, "resolve_host", dns)
    world.extraction.ssrf_guard = True
    # An address glued to word characters: no pattern step (8, 9, 11) can see it, so only
    # step 1 knowing the pinned address keeps it out of the job's error.
    world.database.fail_on["connect"] = f"refused by peer_{PINNED}_on sentinel-Pa55word"
    await world.handler.handle(world.delivery())
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.status == "failed"
    assert job.error is not None
    assert PINNED not in job.error
    assert "sentinel-Pa55word" not in job.error
    assert job.error.endswith(f"refused by peer_{REDACTED}_on {REDACTED}")


async def test_the_worker_redacts_every_resolved_address(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§8.7 step 1 / §13 "Worker redaction": not only the pinned address, but every address
    the one pre-dial resolution returned (the driver may print any of them)."""
    other = "2606:2800:220:1::1"

    async def dns(host: str, port: int | None) -> list[str]:
        if host != world.connection.host:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [PINNED, other]

    job_id = await world.submit({"pg": {"accounts": ["id"]}})
    monkeypatch.setattr(ssrf, "resolve_host", dns)
    world.extraction.ssrf_guard = True
    # Glued to word characters, so no pattern step (8, 11) can see the second address.
    world.database.fail_on["connect"] = f"tried x{other}x then gave up"
    await world.handler.handle(world.delivery())
    job = await world.store.get_job(job_id, tenant="")
    assert job is not None
    assert job.error is not None
    assert other not in job.error
    assert job.error.endswith(f"tried x{REDACTED}x then gave up")
