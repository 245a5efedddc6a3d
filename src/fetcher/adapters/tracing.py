"""The OpenTelemetry SDK behind ``TRACING_ENABLED`` (issue 22, docs/tracing.md).

:func:`install_tracing` sets the process's tracer provider once: the configured sampler, a
``BatchSpanProcessor`` (spans leave in the background, never on a request's or a job's path)
and an OTLP exporter over HTTP/protobuf or gRPC. With tracing off it does nothing and imports
nothing of the SDK: the API's spans stay no-ops (:mod:`fetcher.services.tracing`).

The composition root installs it each time it builds a runtime, which it may retry while a
dependency is down: the provider is installed once per process (OpenTelemetry refuses a second
one) and every later call returns the same flush. The returned callable sends the spans ended so
far; the runtime calls it when it closes, and the provider stops at interpreter exit
(``shutdown_on_exit``), so the last job's spans leave before the process does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from opentelemetry import trace

from fetcher import __version__
from fetcher.services.tracing import enable_tracing
from fetcher.settings.tracing import TracingSettings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.trace.sampling import Sampler

__all__ = ["install_tracing"]

#: The flush of the provider this process installed, once it has one.
_installed: list[Callable[[], None]] = []


def install_tracing(settings: TracingSettings) -> Callable[[], None]:
    """Install the SDK provider when ``settings.enabled``; returns its shutdown (a no-op
    when tracing is off)."""
    if not settings.enabled:
        return lambda: None
    if _installed:
        return _installed[0]
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create(
        {
            **settings.resource_attributes,
            "service.name": settings.service_name,
            "service.version": __version__,
        }
    )
    provider = TracerProvider(resource=resource, sampler=_sampler(settings))
    provider.add_span_processor(BatchSpanProcessor(_exporter(settings)))
    trace.set_tracer_provider(provider)
    enable_tracing()

    def flush() -> None:
        provider.force_flush()

    _installed.append(flush)
    return flush


def _sampler(settings: TracingSettings) -> Sampler:
    from opentelemetry.sdk.trace import sampling

    ratio = sampling.TraceIdRatioBased(settings.sampler_ratio)
    return {
        "always_on": sampling.ALWAYS_ON,
        "always_off": sampling.ALWAYS_OFF,
        "traceidratio": ratio,
        "parentbased_always_on": sampling.ParentBased(sampling.ALWAYS_ON),
        "parentbased_always_off": sampling.ParentBased(sampling.ALWAYS_OFF),
        "parentbased_traceidratio": sampling.ParentBased(ratio),
    }[settings.sampler]


def _exporter(settings: TracingSettings) -> SpanExporter:
    timeout = settings.timeout_ms / 1000
    headers = dict(settings.headers)
    if settings.protocol == "grpc":
        # The otlp-grpc extra (grpcio): absent, the start is refused by the host's import.
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
            OTLPSpanExporter as GrpcExporter,
        )

        insecure = settings.endpoint.startswith("http://")
        exporter: SpanExporter = GrpcExporter(
            endpoint=settings.endpoint, insecure=insecure, headers=headers, timeout=timeout
        )
        return exporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=settings.endpoint, headers=headers, timeout=timeout)
