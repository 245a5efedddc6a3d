"""JSON-lines logging on stdout (§9.1 ``LOG_LEVEL``), every value redacted (§8.7, §9.2).

One line per record, one JSON object per line::

    {"ts": "2026-12-01T15:18:28.123Z", "level": "info", "event": "job created", "logger": "…",
     "env": "development", "request_id": "…", "job_id": "…", "product": "payments"}

* ``ts`` (UTC, milliseconds), ``level`` (``debug``, ``info``, ``warning``, ``error``,
  ``critical``), ``event`` (the message), ``logger`` and ``env`` (``ENV_NAME``) come first;
* then the bound context of :mod:`fetcher.services.log_context` (``request_id``, ``job_id``,
  ``connection_id``, ``product``, ``tenant``, ``sub``), then the ``extra=`` fields of the call;
* ``trace_id`` and ``span_id`` (32 and 16 lowercase hex) on every line logged inside a span
  while tracing is on (issue 22), so a line leads to its trace and a span to its lines;
* ``exception`` holds a traceback, when there is one.

uvicorn's ``color_message`` (the same message with ANSI colour escapes) is never written: the
lines are for machines, and ``event`` already holds the plain text.

``LOG_LEVEL=debug`` is for Fetcher's own lines. Debug lines of other libraries never reach the
output (:class:`OwnDebugOnly`), because several of them print payloads at that level: the AMQP
stack (aio-pika, aiormq, pamqp) dumps whole frames, work-message bodies and their filter values
included; pymongo logs command documents, aiosqlite the statements it runs with their
arguments, botocore request parameters. The known ones are also capped at ``INFO`` so they do
not build those texts at all.

Every string value passes through the redactor, whose step 1 knows the process's secrets
(§8.7, §9.2); numbers and booleans cannot carry one and stay numbers. An ``event`` whose
variable parts were already redacted where they arose (``extra=LOG_REDACTED``) is not redacted
again: §8.7 redacts one text once. A traceback always is.

The standard library is enough here: every module, uvicorn and the drivers log through
:mod:`logging`, and the context lives in one :class:`~contextvars.ContextVar`.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from fetcher.crypto import Redactor
from fetcher.services.log_context import current_log_context
from fetcher.services.tracing import current_trace_ids

__all__ = ["PAYLOAD_LOGGERS", "QUIET_LOGGERS", "JsonFormatter", "OwnDebugOnly", "configure_logging"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
#: Extra fields some libraries attach that never belong in a JSON line.
_DROPPED = frozenset({"color_message"})
_FIXED = ("ts", "level", "event", "logger", "env", "trace_id", "span_id", "exception")
#: Attributes every LogRecord has; anything else on a record came from ``extra=``.
_RECORD_ATTRIBUTES = (
    frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None)))
    | {
        "message",
        "asctime",
        "redacted",
        "taskName",
    }
    | _DROPPED
)
#: Libraries known to log payloads (frames, commands, statements, request parameters) at
#: debug level; capped at INFO so those texts are never even built.
PAYLOAD_LOGGERS = (
    "aio_pika",
    "aiormq",
    "pamqp",
    "aiosqlite",
    "asyncpg",
    "aiomysql",
    "pymongo",
    "botocore",
    "aiobotocore",
    "boto3",
    "s3transfer",
    "urllib3",
    "httpx",
    "httpcore",
    "opentelemetry",
    "grpc",
    "multipart",
    "python_multipart",
    "asyncio",
)


#: Loggers whose ``INFO`` lines repeat what Fetcher already writes: uvicorn's access line (the
#: ``fetcher.access`` line replaces it) and httpx's ``HTTP Request: …`` line per client call
#: (``fetcher demo`` and the SDK inside a process; the Manager logs each request it answers).
#: Their warnings and errors still pass.
QUIET_LOGGERS = ("uvicorn.access", "httpx")


def _timestamp(created: float) -> str:
    moment = datetime.fromtimestamp(created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    """The line format above; ``redactor`` knows the process's secrets (§8.7 step 1)."""

    def __init__(self, redactor: Redactor, env_name: str) -> None:
        super().__init__()
        self._redactor = redactor
        self._env = env_name

    def _value(self, value: object) -> object:
        if value is None or isinstance(value, bool | int | float):
            return value
        return self._redactor.redact(str(value))

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        already_redacted = getattr(record, "redacted", False) is True
        entry: dict[str, object] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "event": message if already_redacted else self._redactor.redact(message),
            "logger": record.name,
            "env": self._env,
        }
        ids = current_trace_ids()
        if ids is not None:  # hex digits only: nothing to redact
            entry["trace_id"], entry["span_id"] = ids
        fields = {**current_log_context()}
        fields.update((k, v) for k, v in vars(record).items() if k not in _RECORD_ATTRIBUTES)
        for key, value in fields.items():
            if key not in _FIXED:
                entry[key] = self._value(value)
        if record.exc_info:
            entry["exception"] = self._redactor.redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


class OwnDebugOnly(logging.Filter):
    """Lets a record below ``INFO`` through only when Fetcher itself logged it."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        return record.levelno >= logging.INFO or name == "fetcher" or name.startswith("fetcher.")


def configure_logging(level: str, redactor: Redactor, env_name: str) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter(redactor, env_name))
    handler.addFilter(OwnDebugOnly())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS.get(level.lower(), logging.INFO))
    for payloads in PAYLOAD_LOGGERS:
        logging.getLogger(payloads).setLevel(logging.INFO)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
