"""Issue 22: ``TRACING_ENABLED`` and ``OTEL_*`` are read and validated at start; a malformed
value refuses the start (§9.3 style) and tracing off reads no ``OTEL_*`` variable at all."""

from __future__ import annotations

import pytest

from fetcher.settings import Settings, StartupRefused
from fetcher.settings import tracing as settings_tracing
from tests.unit.settings.test_startup_refusals import WORKER

KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
EMBEDDED = {"FETCHER_MODE": "embedded", "APP_ENC_KEY": KEY}
ON = {**EMBEDDED, "TRACING_ENABLED": "true"}


def test_tracing_is_off_by_default_and_ignores_otel_variables() -> None:
    settings = Settings.from_env({**EMBEDDED, "OTEL_TRACES_SAMPLER": "nonsense"})
    assert settings.tracing.enabled is False
    assert settings.access_log is True


def test_defaults_when_enabled() -> None:
    tracing = Settings.from_env(ON).tracing
    assert tracing.enabled
    assert tracing.protocol == "http/protobuf"
    assert tracing.endpoint == "http://localhost:4318/v1/traces"
    assert tracing.service_name == "fetcher-embedded"
    assert tracing.sampler == "parentbased_always_on"
    assert tracing.timeout_ms == 10_000


def test_every_setting_is_read() -> None:
    tracing = Settings.from_env(
        {
            **ON,
            "OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.internal:4318/",
            "OTEL_SERVICE_NAME": "fetcher-eu",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,team=data",
        }
    ).tracing
    assert tracing.endpoint == "https://collector.internal:4318/v1/traces"
    assert (tracing.service_name, tracing.sampler) == ("fetcher-eu", "parentbased_traceidratio")
    assert (tracing.sampler_ratio, tracing.timeout_ms) == (0.25, 2500)
    assert dict(tracing.resource_attributes) == {
        "deployment.environment": "prod",
        "team": "data",
    }


def test_the_traces_endpoint_is_used_as_is_and_wins() -> None:
    tracing = Settings.from_env(
        {
            **ON,
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:9999/custom",
        }
    ).tracing
    assert tracing.endpoint == "http://b:9999/custom"


def test_grpc_keeps_the_endpoint_without_a_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_tracing, "GRPC_EXPORTER", "json")  # any installed module
    tracing = Settings.from_env({**ON, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}).tracing
    assert (tracing.protocol, tracing.endpoint) == ("grpc", "http://localhost:4317")


def test_grpc_without_its_extra_refuses_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_tracing, "GRPC_EXPORTER", "fetcher_no_such.package")
    with pytest.raises(StartupRefused) as caught:
        Settings.from_env({**ON, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"})
    assert caught.value.reason == (
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc needs the fetcher[otlp-grpc] extra"
    )


def test_header_values_are_secrets_never_shown() -> None:
    settings = Settings.from_env(
        {**ON, "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20tok9"}
    )
    assert dict(settings.tracing.headers) == {"authorization": "Bearer tok9"}
    assert "Bearer tok9" in settings.secrets
    assert "tok9" not in repr(settings)


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"TRACING_ENABLED": "yes"}, "TRACING_ENABLED"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://c:21"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:99999"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://u:pw@c:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http:///v1/traces"},
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ),
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"),
        ({"OTEL_TRACES_SAMPLER_ARG": "1.5"}, "OTEL_TRACES_SAMPLER_ARG"),
        ({"OTEL_TRACES_SAMPLER_ARG": "half"}, "OTEL_TRACES_SAMPLER_ARG"),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "-1"}, "OTEL_EXPORTER_OTLP_TIMEOUT"),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "0"}, "OTEL_EXPORTER_OTLP_TIMEOUT"),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, "OTEL_EXPORTER_OTLP_HEADERS"),
        ({"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a b=c"}, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "=x"}, "OTEL_RESOURCE_ATTRIBUTES"),
    ],
)
def test_a_malformed_value_refuses_the_start(change: dict[str, str], name: str) -> None:
    with pytest.raises(StartupRefused) as caught:
        Settings.from_env({**ON, **change})
    assert caught.value.reason == f"invalid value for {name}"


def test_access_log_switch() -> None:
    assert Settings.from_env({**EMBEDDED, "ACCESS_LOG": "false"}).access_log is False
    with pytest.raises(StartupRefused) as caught:
        Settings.from_env({**EMBEDDED, "ACCESS_LOG": "off"})
    assert caught.value.reason == "invalid value for ACCESS_LOG"


def test_trace_url_template_is_read_by_the_console_modes() -> None:
    """§15.3: unset is ``None``; a valid template is kept as given; the Worker serves no
    console and does not read it."""
    assert Settings.from_env(EMBEDDED).trace_url_template is None
    template = "https://tempo.example/trace/{traceId}?orgId=1"
    given = {**EMBEDDED, "TRACE_URL_TEMPLATE": template}
    assert Settings.from_env(given).trace_url_template == template
    worker = {**WORKER, "TRACE_URL_TEMPLATE": "not a template"}
    assert Settings.from_env(worker).trace_url_template is None


@pytest.mark.parametrize(
    "template",
    [
        "https://tempo.example/trace/",  # no placeholder
        "https://tempo.example/{traceId}/{traceId}",  # twice
        "https://tempo.example/{traceid}",  # not the placeholder
        "https://tempo.example/{traceId}/{spanId}",  # another brace
        "ftp://tempo.example/{traceId}",
        "javascript:alert(1)//{traceId}",
        "/trace/{traceId}",  # not absolute
        "https://user:pw@tempo.example/{traceId}",  # credentials
        "https://tempo.example:99999/{traceId}",
        "https://tempo.example/a b/{traceId}",
        "https://tempo.example/" + "a" * 2048 + "{traceId}",
    ],
)
def test_a_malformed_trace_url_template_refuses_the_start(template: str) -> None:
    with pytest.raises(StartupRefused) as caught:
        Settings.from_env({**EMBEDDED, "TRACE_URL_TEMPLATE": template})
    assert caught.value.reason == "invalid value for TRACE_URL_TEMPLATE"
