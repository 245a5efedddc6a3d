"""The Fetcher engine (contract §1.4): importable, standard library only, no I/O of its own.

Hosts supply connectors through the ports in ``fetcher.engine.ports``; in-memory fakes of every
port live in ``fetcher.engine.testing``. Everything not listed in ``__all__`` is private.
"""

from fetcher.engine.core import Engine
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.limits import DEFAULT_LIMITS, Limits
from fetcher.engine.model import ConnectionDescriptor, ExtractionRequest, ExtractionResult
from fetcher.engine.planner import Plan
from fetcher.engine.ports import Clock, Connector, ConnectorRegistry, ResultSink

__all__ = [
    "Limits",
    "DEFAULT_LIMITS",
    "ExtractionRequest",
    "ConnectionDescriptor",
    "Engine",
    "Plan",
    "ExtractionResult",
    "ErrorCategory",
    "EngineError",
    "Connector",
    "ConnectorRegistry",
    "ResultSink",
    "Clock",
]
