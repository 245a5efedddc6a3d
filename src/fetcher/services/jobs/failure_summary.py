"""What a span and a log line may say about a failed job (issue 33, docs/security.md).

The §4.5 failure text belongs on the job (``metadata.error``) and in its ``job.failed`` event,
and nowhere else: it quotes what the caller sent (``'SSN-123-45-6789' is not an ISO 8601
date``, a table or field name, a UUID) and its ``<detail>`` is driver text, which can quote a
row or filter value (PostgreSQL's ``invalid input syntax for type date: "…"``). A span's status
and the ``job failed`` log line carry a :class:`FailureSummary` instead: the §4.5 category and
the text's fixed part with every caller-supplied part replaced by its §4.5 placeholder.

* A datasource name is kept when it is a connection name (``^[A-Za-z0-9_-]{1,100}$``, §2.5
  ``configName``): a job runs only with datasources that exist, and an operator needs to know
  which one failed. Anything else quoted becomes ``<ds>``, ``<t>``, ``<f>`` …
* Every ``<detail>`` is dropped (``: <detail>``), and a schema validation keeps no issue.
* A text of no §4.5 shape (none is written today) is summarised as ``internal`` with a
  placeholder, never echoed.

The summary is a pure function of the text, so every path that fails a job (the Worker, the
reaper, the Manager's publish failure) can use it with the text it already has.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from fetcher.engine import ErrorCategory

__all__ = ["UNRECOGNISED", "FailureSummary", "summarise_failure"]

#: The summary of a text of no §4.5 shape.
UNRECOGNISED: Final = "<failure text of no known shape>"

_CONNECTION_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,100}")


@dataclass(frozen=True, slots=True)
class FailureSummary:
    """``category`` is a §4.5 category name; ``message`` holds no caller-supplied value."""

    category: str
    message: str


def _shape(
    pattern: str, category: ErrorCategory, template: str
) -> tuple[re.Pattern[str], str, str]:
    return re.compile(pattern, re.DOTALL), category.value, template


#: §4.5's table, in its order: (the text's shape, its category, the summary). ``{ds}`` is the
#: datasource when it is a connection name, else ``<ds>``.
_SHAPES: Final = (
    _shape(r"datasource '(?P<ds>.*)' is not configured", ErrorCategory.NOT_FOUND,
           "datasource '{ds}' is not configured"),
    _shape(r"datasource '(?P<ds>.*)' is ambiguous", ErrorCategory.CONFLICT,
           "datasource '{ds}' is ambiguous"),
    _shape(r"datasource '(?P<ds>.*)' does not belong to the job's product",
           ErrorCategory.FORBIDDEN, "datasource '{ds}' does not belong to the job's product"),
    _shape(r"failed to decrypt credentials for datasource '(?P<ds>.*?)': .*",
           ErrorCategory.INTERNAL, "failed to decrypt credentials for datasource '{ds}': <detail>"),
    _shape(r"failed to connect to datasource '(?P<ds>.*?)': .*", ErrorCategory.CONNECT,
           "failed to connect to datasource '{ds}': <detail>"),
    _shape(r"failed to discover datasource schema '(?P<ds>.*?)': .*", ErrorCategory.UNAVAILABLE,
           "failed to discover datasource schema '{ds}': <detail>"),
    _shape(r"extraction request failed schema validation: .*", ErrorCategory.VALIDATION,
           "extraction request failed schema validation: <issue>"),
    _shape(r"limit override exceeds the configured maximum: limits\..*", ErrorCategory.VALIDATION,
           "limit override exceeds the configured maximum: limits.<name>"),
    _shape(r"failed to query datasource '(?P<ds>.*?)': .*", ErrorCategory.UNAVAILABLE,
           "failed to query datasource '{ds}': <detail>"),
    _shape(r"execution exceeded its deadline", ErrorCategory.TIMEOUT,
           "execution exceeded its deadline"),
    _shape(r"extraction result exceeds the configured size limit \((?P<n>[0-9]{1,20}) bytes\)",
           ErrorCategory.LIMIT_EXCEEDED,
           "extraction result exceeds the configured size limit ({n} bytes)"),
    _shape(r"failed to store result: .*", ErrorCategory.UNAVAILABLE,
           "failed to store result: <detail>"),
    _shape(r"failed to record job completion", ErrorCategory.INTERNAL,
           "failed to record job completion"),
    _shape(r"extraction abandoned: worker stopped before completion", ErrorCategory.INTERNAL,
           "extraction abandoned: worker stopped before completion"),
    _shape(r"work message was not processed", ErrorCategory.INTERNAL,
           "work message was not processed"),
    _shape(r"work message expired before processing", ErrorCategory.VALIDATION,
           "work message expired before processing"),
    _shape(r"invalid work message: .*", ErrorCategory.VALIDATION,
           "invalid work message: <reason>"),
    _shape(r"process failed: unable to publish", ErrorCategory.UNAVAILABLE,
           "process failed: unable to publish"),
    _shape(r"internal error", ErrorCategory.INTERNAL, "internal error"),
)  # fmt: skip


def summarise_failure(text: str) -> FailureSummary:
    """The category and the value-free message of the §4.5 failure ``text``."""
    for pattern, category, template in _SHAPES:
        found = pattern.fullmatch(text)
        if found is None:
            continue
        parts = found.groupdict()
        ds = parts.get("ds")
        return FailureSummary(
            category,
            template.format(
                ds=ds if ds is not None and _CONNECTION_NAME.fullmatch(ds) else "<ds>",
                n=parts.get("n", ""),
            ),
        )
    return FailureSummary(ErrorCategory.INTERNAL.value, UNRECOGNISED)
