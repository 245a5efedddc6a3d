"""Issue 33: the ``Host`` allow-list and the cross-site write rule
(:mod:`fetcher.services.api.request_origin`), case by case; ``ALLOWED_HOSTS`` as settings read it.
The running processes are tested in ``tests/e2e/test_http_edge_hosts.py``."""

from __future__ import annotations

import pytest

from fetcher.services.api.request_origin import HostPolicy, cross_site_write
from fetcher.settings import Settings, StartupRefused

KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
DEFAULT = HostPolicy.build(())


@pytest.mark.parametrize(
    "host",
    [
        None,
        "127.0.0.1",
        "127.0.0.1:4006",
        "127.9.8.7:1",
        "10.42.7.19:4006",
        "[::1]",
        "[::1]:4006",
        "[fd00::7]:80",
        "localhost",
        "LocalHost:4006",
        "localhost.",
        "console.localhost:4006",
    ],
)
def test_the_default_serves_ip_literals_and_loopback_names(host: str | None) -> None:
    assert DEFAULT.allows(host)


@pytest.mark.parametrize(
    "host",
    [
        "rebind.example",
        "rebind.example:4006",
        "localhost.example",
        "evil-localhost",
        "127.0.0.1.nip.io",
        "",
        " ",
        "a b",
        "[::1",
        "[::1]x",
        "[nothex]:80",
        "localhost:",
        "localhost:abc",
        "localhost:123456",
        "host/evil",
        "..",
    ],
)
def test_the_default_refuses_every_other_name_and_malformed_values(host: str) -> None:
    assert not DEFAULT.allows(host)


def test_allowed_hosts_names_suffixes_and_the_server_address() -> None:
    policy = HostPolicy.build(["Fetcher.Internal", ".svc.cluster.local"], "api.example:ignored")
    assert policy.allows("fetcher.internal:4006")
    assert policy.allows("fetcher-manager.ops.svc.cluster.local")
    assert policy.allows("svc.cluster.local")
    assert not policy.allows("xsvc.cluster.local")
    assert not policy.allows("svc.cluster.local.evil.example")
    named = HostPolicy.build((), "fetcher.internal")
    assert named.allows("fetcher.internal:4006")
    assert not named.allows("other.internal")
    assert HostPolicy.build(["*"]).allows("anything.example")
    starred = HostPolicy.build(["*.example.com"])
    assert starred.allows("api.example.com")
    assert starred.allows("example.com")
    assert not starred.allows("other.example")


def _write(method: str = "POST", **headers: str | None) -> bool:
    return cross_site_write(
        method=method,
        host=headers.get("host", "127.0.0.1:4006"),
        origin=headers.get("origin"),
        fetch_site=headers.get("fetch_site"),
        cors_allowed=bool(headers.get("cors")),
    )


def test_writes_from_another_site_are_recognized() -> None:
    assert _write(fetch_site="cross-site")
    assert _write(fetch_site="same-site")
    assert _write("DELETE", origin="http://rebind.example:4006")
    assert _write("PATCH", origin="null")
    assert _write("PUT", origin="http://127.0.0.1:4007")
    assert _write(origin="http://127.0.0.1:4006", host=None)


def test_own_origin_non_browsers_reads_and_cors_origins_pass() -> None:
    assert not _write()
    assert not _write(origin="http://127.0.0.1:4006", fetch_site="same-origin")
    assert not _write(origin="https://127.0.0.1:4006")
    assert not _write(fetch_site="none")
    assert not _write("GET", fetch_site="cross-site")
    assert not _write("OPTIONS", origin="http://rebind.example")
    assert not _write(fetch_site="cross-site", origin="https://console.example", cors="1")


def _env(value: str) -> dict[str, str]:
    return {"FETCHER_MODE": "embedded", "APP_ENC_KEY": KEY, "ALLOWED_HOSTS": value}


def test_settings_read_allowed_hosts_and_refuse_malformed_entries() -> None:
    settings = Settings.from_env(_env(" fetcher.internal , .svc ,*, 10.0.0.1,"))
    assert settings.allowed_hosts == ("fetcher.internal", ".svc", "*", "10.0.0.1")
    assert Settings.from_env(_env("")).allowed_hosts == ()
    for bad in ("http://fetcher.internal", "fetcher.internal:4006", "a b", "**.example"):
        with pytest.raises(StartupRefused) as caught:
            Settings.from_env(_env(bad))
        assert caught.value.reason == "invalid value for ALLOWED_HOSTS"
