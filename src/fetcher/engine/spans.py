"""The engine's spans (issue 22): planning and one span per datasource.

The engine imports nothing outside the standard library (§1.4), so it does not know
OpenTelemetry: it opens its spans through :data:`SpanOpener`, a hook the services install while
tracing is on (``fetcher.services.tracing``). Without one, :func:`engine_span` yields a handle
that ignores everything, at the cost of one lookup.

Attributes are counts, names and the engine's ``db.system`` only, never a value, a password, a
host or a filter value. A failure adds ``error.type`` with the error's category only: an engine
error's text is redacted later, by the service (§8.7), and the job's span carries that text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Final, Protocol

from fetcher.engine.errors import EngineError
from fetcher.engine.types import EngineType

__all__ = ["DB_SYSTEM", "SpanHandle", "SpanOpener", "engine_span", "set_span_opener"]

#: ``db.system`` of each engine (OpenTelemetry database semantic conventions).
DB_SYSTEM: Final = {
    EngineType.POSTGRESQL: "postgresql",
    EngineType.MYSQL: "mysql",
    EngineType.SQL_SERVER: "mssql",
    EngineType.ORACLE: "oracle",
    EngineType.MONGODB: "mongodb",
    EngineType.SQLITE: "sqlite",
}


class SpanHandle(Protocol):
    def set_attribute(self, key: str, value: str | bool | int | float) -> object: ...


#: Opens a span current for a block: ``opener(name, attributes)``.
SpanOpener = Callable[[str, Mapping[str, str | int]], AbstractContextManager[SpanHandle]]


class _Ignored:
    def set_attribute(self, key: str, value: str | bool | int | float) -> object:
        return None


_IGNORED: Final = _Ignored()
_opener: list[SpanOpener] = []


def set_span_opener(opener: SpanOpener | None) -> None:
    """Install (or, with ``None``, remove) the process's span opener."""
    _opener[:] = [opener] if opener is not None else []


@contextmanager
def engine_span(name: str, attributes: Mapping[str, str | int]) -> Iterator[SpanHandle]:
    if not _opener:
        yield _IGNORED
        return
    with _opener[0](name, attributes) as span:
        try:
            yield span
        except EngineError as exc:
            span.set_attribute("error.type", exc.category.value)
            raise
