"""The JSON lines a logger writes through the production formatter, collected in memory."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from fetcher.cli.logs import JsonFormatter
from fetcher.crypto import Redactor


class JsonLines(logging.Handler):
    """Each record as the JSON object :class:`~fetcher.cli.logs.JsonFormatter` writes."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter(Redactor(), "test"))
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@contextmanager
def json_lines(logger_name: str) -> Iterator[JsonLines]:
    """Collect ``logger_name``'s records at DEBUG and above for the block."""
    handler = JsonLines()
    logger = logging.getLogger(logger_name)
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
