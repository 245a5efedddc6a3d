"""JSON-lines logging on stdout (§9.1 ``LOG_LEVEL``), every message redacted (§8.7, §9.2)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from fetcher.crypto import Redactor

__all__ = ["configure_logging"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class _JsonFormatter(logging.Formatter):
    def __init__(self, redactor: Redactor, env_name: str) -> None:
        super().__init__()
        self._redactor = redactor
        self._env = env_name

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "env": self._env,
            "message": self._redactor.redact(message),
        }
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, redactor: Redactor, env_name: str) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_JsonFormatter(redactor, env_name))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS.get(level.lower(), logging.INFO))
    for noisy in ("uvicorn.access",):
        logging.getLogger(noisy).setLevel(logging.WARNING)
