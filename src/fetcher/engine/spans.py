"""The engine's spans (issue 22): planning and one span per datasource.

The engine is a leaf of the project (it imports no service), so it opens its spans through the
OpenTelemetry API directly; until the host installs the SDK (``TRACING_ENABLED``) the API's
tracer is a no-op. Attributes are counts and the engine's name only, never a value, a
password, a host or a filter value (issue 22). A failure sets status error with the error's
category only: an engine error's text is redacted later, by the service (§8.7), and it is the
job's span that carries that redacted text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from opentelemetry import trace

from fetcher.engine.errors import EngineError
from fetcher.engine.types import EngineType

__all__ = ["DB_SYSTEM", "engine_span"]

#: ``db.system`` of each engine (OpenTelemetry database semantic conventions).
DB_SYSTEM: Final = {
    EngineType.POSTGRESQL: "postgresql",
    EngineType.MYSQL: "mysql",
    EngineType.SQL_SERVER: "mssql",
    EngineType.ORACLE: "oracle",
    EngineType.MONGODB: "mongodb",
    EngineType.SQLITE: "sqlite",
}

_tracer: Final = trace.get_tracer("fetcher.engine")


@contextmanager
def engine_span(name: str, attributes: Mapping[str, str | int]) -> Iterator[trace.Span]:
    with _tracer.start_as_current_span(
        name,
        attributes=dict(attributes),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except Exception as exc:
            kind = exc.category.value if isinstance(exc, EngineError) else type(exc).__name__
            span.set_status(trace.Status(trace.StatusCode.ERROR, kind))
            span.set_attribute("error.type", kind)
            raise
