"""The six job limits and how a request lowers them (contract §3.5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from fetcher.engine.errors import EngineError, ErrorCategory

__all__ = ["DEFAULT_LIMITS", "LIMIT_NAMES", "Limits"]

#: The request spelling (``dataRequest.limits`` keys) of each limit, in contract order.
LIMIT_NAMES: Mapping[str, str] = {
    "maxDatasources": "max_datasources",
    "maxTablesPerDatasource": "max_tables_per_datasource",
    "maxFieldsPerTable": "max_fields_per_table",
    "maxConcurrency": "max_concurrency",
    "timeoutSeconds": "timeout_seconds",
    "maxResultBytes": "max_result_bytes",
}

#: §5.5: 256 MiB, the highest result size any configuration may allow.
MAX_RESULT_BYTES_CEILING = 268_435_456


@dataclass(frozen=True, slots=True)
class Limits:
    max_datasources: int = 10
    max_tables_per_datasource: int = 20
    max_fields_per_table: int = 50
    max_concurrency: int = 4
    timeout_seconds: int = 300
    max_result_bytes: int = MAX_RESULT_BYTES_CEILING

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"limit {f.name} must be a positive integer")

    def lowered(self, overrides: Mapping[str, object] | None) -> Limits:
        """Apply request overrides (camelCase keys) that may only lower these limits.

        Raises ``EngineError(VALIDATION)`` naming ``limits.<name>`` for a value that is not a
        positive JSON integer, an unknown name, or a value above this (maximum) limit.
        """
        if not overrides:
            return self
        changes: dict[str, int] = {}
        for name, value in overrides.items():
            attr = LIMIT_NAMES.get(name)
            if attr is None:
                raise EngineError(ErrorCategory.VALIDATION, f"unknown limit: limits.{name}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise EngineError(
                    ErrorCategory.VALIDATION, f"limits.{name} must be a positive integer"
                )
            if value > getattr(self, attr):
                raise EngineError(
                    ErrorCategory.VALIDATION,
                    f"limit override exceeds the configured maximum: limits.{name}",
                )
            changes[attr] = value
        return replace(self, **changes)

    def with_result_ceiling(self, configured: int | None) -> Limits:
        """§9.1 ``ENGINE_MAX_RESULT_BYTES``: unset or ≤ 0 keeps the default; higher is clamped."""
        if configured is None or configured <= 0:
            return self
        return replace(self, max_result_bytes=min(configured, MAX_RESULT_BYTES_CEILING))


DEFAULT_LIMITS = Limits()
