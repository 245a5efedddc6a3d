"""Trace settings (issue 22, docs/tracing.md): ``TRACING_ENABLED`` and the standard ``OTEL_*``.

Read once at startup with the rest of :mod:`fetcher.settings`; a malformed value refuses the
start with ``invalid value for <NAME>``, as §9.3 does for every other setting. With
``TRACING_ENABLED`` unset or ``false`` no ``OTEL_*`` variable is read at all (a stray or
malformed one cannot stop a process that does not trace).

The names and meanings are those of the OpenTelemetry SDK specification, so an operator's
existing collector configuration carries over. Only what Fetcher supports is accepted:

* ``OTEL_EXPORTER_OTLP_PROTOCOL`` (or ``…_TRACES_PROTOCOL``): ``http/protobuf`` (default) or
  ``grpc`` (``http/json`` has no Python exporter: refused rather than silently ignored);
* ``OTEL_EXPORTER_OTLP_ENDPOINT`` (base URL; ``/v1/traces`` is appended for HTTP) or
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the full URL, used as is): ``http://`` or ``https://``;
* ``OTEL_EXPORTER_OTLP_HEADERS`` (or ``…_TRACES_HEADERS``): ``key=value`` pairs, commas between;
  the values are treated as secrets (a collector token must never reach a log line);
* ``OTEL_EXPORTER_OTLP_TIMEOUT`` (or ``…_TRACES_TIMEOUT``): milliseconds, default 10000;
* ``OTEL_SERVICE_NAME`` (default ``fetcher-<mode>``) and ``OTEL_RESOURCE_ATTRIBUTES``;
* ``OTEL_TRACES_SAMPLER`` and ``OTEL_TRACES_SAMPLER_ARG`` (a ratio in [0, 1]).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

__all__ = ["SAMPLERS", "TracingSettings", "read_tracing_settings"]

#: ``OTEL_TRACES_SAMPLER`` values of the SDK specification; the default is parent-based.
SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)
_PROTOCOLS = ("http/protobuf", "grpc")
_DEFAULT_ENDPOINTS = {"http/protobuf": "http://localhost:4318", "grpc": "http://localhost:4317"}
_RATIO_RE = re.compile(r"(0|1)(\.[0-9]{1,9})?|\.[0-9]{1,9}")
_KEY_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")


@dataclass(frozen=True, slots=True)
class TracingSettings:
    """What :mod:`fetcher.adapters.tracing` needs; ``enabled`` false means no SDK at all."""

    enabled: bool = False
    protocol: str = "http/protobuf"
    #: The exporter's full URL (HTTP: with ``/v1/traces``; gRPC: ``scheme://host:port``).
    endpoint: str = ""
    service_name: str = "fetcher"
    sampler: str = "parentbased_always_on"
    sampler_ratio: float = 1.0
    timeout_ms: int = 10_000
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    resource_attributes: Mapping[str, str] = field(default_factory=dict)


class TracingSettingRefused(ValueError):
    """A malformed value of ``name``; the text is the §9.3 refusal reason."""

    def __init__(self, name: str, reason: str = "") -> None:
        super().__init__(reason or f"invalid value for {name}")
        self.name = name


#: The gRPC exporter comes with the ``otlp-grpc`` extra (grpcio), not with every install.
GRPC_EXPORTER = "opentelemetry.exporter.otlp.proto.grpc"


def read_tracing_settings(env: Mapping[str, str], *, mode: str) -> TracingSettings:
    """The settings of ``env`` for a process of ``mode``; raises :class:`TracingSettingRefused`."""
    reader = _Env(env)
    enabled = reader.get("TRACING_ENABLED").lower()
    if enabled not in ("", "true", "false"):
        raise TracingSettingRefused("TRACING_ENABLED")
    if enabled != "true":
        return TracingSettings()
    protocol = reader.signal("PROTOCOL", "http/protobuf")
    if protocol not in _PROTOCOLS:
        raise TracingSettingRefused(reader.signal_name("PROTOCOL"))
    if protocol == "grpc" and not _installed(GRPC_EXPORTER):
        name = reader.signal_name("PROTOCOL")
        raise TracingSettingRefused(name, f"{name}=grpc needs the fetcher[otlp-grpc] extra")
    sampler = reader.get("OTEL_TRACES_SAMPLER", "parentbased_always_on").lower()
    if sampler not in SAMPLERS:
        raise TracingSettingRefused("OTEL_TRACES_SAMPLER")
    return TracingSettings(
        enabled=True,
        protocol=protocol,
        endpoint=_endpoint(reader, protocol),
        service_name=reader.get("OTEL_SERVICE_NAME", f"fetcher-{mode}"),
        sampler=sampler,
        sampler_ratio=_ratio(reader.get("OTEL_TRACES_SAMPLER_ARG")),
        timeout_ms=_timeout(reader),
        headers=_pairs(reader.signal("HEADERS", ""), reader.signal_name("HEADERS")),
        resource_attributes=_pairs(
            reader.get("OTEL_RESOURCE_ATTRIBUTES"), "OTEL_RESOURCE_ATTRIBUTES"
        ),
    )


class _Env:
    """Reads ``OTEL_EXPORTER_OTLP_TRACES_<X>`` before ``OTEL_EXPORTER_OTLP_<X>`` (the spec's
    precedence) and remembers which one it used, so a refusal names the variable set."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def get(self, name: str, default: str = "") -> str:
        return self.env.get(name, "").strip() or default

    def signal_name(self, suffix: str) -> str:
        specific = f"OTEL_EXPORTER_OTLP_TRACES_{suffix}"
        return specific if self.get(specific) else f"OTEL_EXPORTER_OTLP_{suffix}"

    def signal(self, suffix: str, default: str) -> str:
        return self.get(self.signal_name(suffix), default)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _endpoint(reader: _Env, protocol: str) -> str:
    specific = reader.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    name = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" if specific else "OTEL_EXPORTER_OTLP_ENDPOINT"
    url = specific or reader.get("OTEL_EXPORTER_OTLP_ENDPOINT", _DEFAULT_ENDPOINTS[protocol])
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise TracingSettingRefused(name) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise TracingSettingRefused(name)
    if parts.username or parts.password:  # credentials belong in OTEL_EXPORTER_OTLP_HEADERS
        raise TracingSettingRefused(name)
    if specific or protocol == "grpc":
        return url
    return url.rstrip("/") + "/v1/traces"


def _ratio(raw: str) -> float:
    if not raw:
        return 1.0
    if not _RATIO_RE.fullmatch(raw) or float(raw) > 1.0:
        raise TracingSettingRefused("OTEL_TRACES_SAMPLER_ARG")
    return float(raw)


def _timeout(reader: _Env) -> int:
    name = reader.signal_name("TIMEOUT")
    raw = reader.get(name, "10000")
    if not raw.isdigit() or not 0 < int(raw) <= 600_000:
        raise TracingSettingRefused(name)
    return int(raw)


def _pairs(raw: str, name: str) -> dict[str, str]:
    """``k1=v1,k2=v2`` (values percent-decoded, as the spec's W3C Baggage format says)."""
    pairs: dict[str, str] = {}
    for item in filter(None, (i.strip() for i in raw.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not _KEY_RE.fullmatch(key) or not value.strip():
            raise TracingSettingRefused(name)
        pairs[key] = unquote(value.strip())
    return pairs
