"""The log line format (§9.1 JSON lines, §9.2 no secrets, §8.7 redaction once): fixed keys,
the bound context, ``extra=`` fields, every value redacted."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from fetcher.cli.logs import JsonFormatter
from fetcher.crypto import Redactor
from fetcher.crypto.redact import LOG_REDACTED
from fetcher.services.log_context import bind_log_context, current_log_context, log_context

SECRET = "hunter2-very-secret"
JOB = "0190a1b2-0000-7000-8000-000000000001"
TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


@pytest.fixture
def capture() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(Redactor(secrets=[SECRET]), "test-env"))
    logger = logging.getLogger("fetcher.test.logformat")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        yield logger, stream
    finally:
        logger.handlers.clear()


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_fixed_keys_come_first_in_order(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture
    logger.info("job %s created", "x")
    [line] = lines(stream)
    assert list(line) == ["ts", "level", "event", "logger", "env"]
    assert TS.fullmatch(str(line["ts"])), line["ts"]
    assert (line["level"], line["event"], line["logger"], line["env"]) == (
        "info",
        "job x created",
        "fetcher.test.logformat",
        "test-env",
    )


def test_extra_fields_reach_the_line(capture: tuple[logging.Logger, io.StringIO]) -> None:
    """The old formatter dropped ``extra=``: the job service's ``job_id`` never showed."""
    logger, stream = capture
    logger.warning("publish failed", extra={"job_id": JOB, "rows": 3, "ok": False})
    [line] = lines(stream)
    assert (line["job_id"], line["rows"], line["ok"]) == (JOB, 3, False)
    assert line["level"] == "warning"


def test_bound_context_is_on_every_line_and_reset_after_the_block(
    capture: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = capture
    with log_context(request_id="req-1", job_id=JOB, product="payments", tenant=None):
        logger.info("inside")
        with log_context(connection_id="c-1"):
            logger.info("nested")
    logger.info("outside")
    inside, nested, outside = lines(stream)
    assert {k: inside[k] for k in ("request_id", "job_id", "product")} == {
        "request_id": "req-1",
        "job_id": JOB,
        "product": "payments",
    }
    assert "tenant" not in inside  # None is not bound
    assert nested["connection_id"] == "c-1"
    assert nested["job_id"] == JOB
    assert "job_id" not in outside
    assert current_log_context() == {}


def test_unknown_context_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown log context keys: password"):
        bind_log_context(password="x")


async def test_each_task_carries_its_own_context(
    capture: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = capture

    async def job(job_id: str) -> None:
        bind_log_context(job_id=job_id)  # a task's binding ends with the task
        await asyncio.sleep(0)
        logger.info("claimed")

    await asyncio.gather(job("a" * 8), job("b" * 8))
    assert sorted(str(line["job_id"]) for line in lines(stream)) == ["a" * 8, "b" * 8]
    assert current_log_context() == {}


def test_every_value_is_redacted(capture: tuple[logging.Logger, io.StringIO]) -> None:
    """§9.2: the secret never appears, whichever part of the line carries it."""
    logger, stream = capture
    with log_context(product=f"p-{SECRET}"):
        try:
            raise RuntimeError(f"connect postgresql://u:{SECRET}@db:5432/x failed")
        except RuntimeError:
            logger.exception("failed with %s", SECRET, extra={"detail": f"pw {SECRET}"})
    text = stream.getvalue()
    assert SECRET not in text
    [line] = lines(stream)
    assert line["event"] == "failed with [redacted]"
    assert line["product"] == "p-[redacted]"
    assert line["detail"] == "pw [redacted]"
    assert "RuntimeError: connect [redacted] failed" in str(line["exception"])


def test_a_text_redacted_where_it_arose_is_not_redacted_again(
    capture: tuple[logging.Logger, io.StringIO],
) -> None:
    """§8.7: one text is redacted once. The marked message is written as given (an address
    left in it proves no second pass ran); unmarked, the same text is redacted."""
    logger, stream = capture
    logger.warning("no route to %s", "10.0.0.5", extra=LOG_REDACTED)
    logger.warning("no route to %s", "10.0.0.5")
    marked, unmarked = lines(stream)
    assert marked["event"] == "no route to 10.0.0.5"
    assert "redacted" not in marked
    assert unmarked["event"] == "no route to [redacted]"


def test_extra_cannot_overwrite_the_fixed_keys(
    capture: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = capture
    logger.info("real", extra={"event": "forged", "ts": "0", "env": "prod"})
    [line] = lines(stream)
    assert (line["event"], line["env"]) == ("real", "test-env")
    assert TS.fullmatch(str(line["ts"]))


def test_uvicorns_color_message_never_reaches_the_line(
    capture: tuple[logging.Logger, io.StringIO],
) -> None:
    """Issue 33: uvicorn attaches the message again with ANSI escapes as ``color_message``."""
    logger, stream = capture
    logger.info("Started server process [%d]", 7, extra={"color_message": "\x1b[36m%d\x1b[0m"})
    [line] = lines(stream)
    assert "color_message" not in line
    assert "\x1b" not in stream.getvalue()
    assert "\\u001b" not in stream.getvalue()


def test_debug_lines_of_other_libraries_never_pass() -> None:
    """Issue 33: at ``LOG_LEVEL=debug`` only Fetcher's own debug lines pass; aiormq's frame
    dumps (work-message bodies, filter values) do not, whatever the logger's level."""
    from fetcher.cli.logs import OwnDebugOnly

    def record(name: str, level: int) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, "frame %s", ("SSN-123",), None)

    own = OwnDebugOnly()
    assert own.filter(record("fetcher.services.jobs.service", logging.DEBUG))
    assert own.filter(record("fetcher", logging.DEBUG))
    for library in ("aiormq.connection", "aio_pika.exchange", "pamqp", "pymongo.command"):
        assert not own.filter(record(library, logging.DEBUG)), library
        assert own.filter(record(library, logging.INFO)), library
    assert not own.filter(record("fetcherx", logging.DEBUG))


def test_configured_logging_caps_payload_loggers_at_info() -> None:
    from fetcher.cli.logs import PAYLOAD_LOGGERS, configure_logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in PAYLOAD_LOGGERS}
    try:
        configure_logging("debug", Redactor(secrets=[]), "test")
        assert root.level == logging.DEBUG
        for name in ("aiormq", "aio_pika", "pamqp", "pymongo", "aiosqlite", "botocore"):
            assert name in PAYLOAD_LOGGERS
            assert not logging.getLogger(f"{name}.x").isEnabledFor(logging.DEBUG), name
        # httpx's one INFO line per client request (fetcher demo's own calls) stays out.
        assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
        assert logging.getLogger("httpx").isEnabledFor(logging.WARNING)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, saved in levels.items():
            logging.getLogger(name).setLevel(saved)
