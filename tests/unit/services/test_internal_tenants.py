"""Internal datasources in multi-tenant mode (§9.4 ``DATASOURCE_<NAME>_TENANTS``, §12.5, §12.6).

The tenant ID is part of the deterministic ID; ``TENANTS`` names who sees a definition (nobody
without it), each item matching the tenant pattern with ``fullmatch``, else the startup refusal
``invalid internal datasource <NAME>: <problem>``; single-tenant mode ignores the variable.
"""

from __future__ import annotations

import pytest

from fetcher.services.connections.internal_datasources import (
    internal_connection_id,
    parse_internal_datasources,
    parse_internal_tenants,
    visible_internal,
)
from fetcher.settings import Settings, StartupRefused

SECRET = "ZmV0Y2hlci10ZXN0LXNlY3JldC0zMi1ieXRlcy1sb25nISE="
BASE = {
    "FETCHER_MODE": "embedded",
    "APP_ENC_KEY": "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8=",
    "AUTH_MODE": "jwt",
    "AUTH_ISSUER": "https://issuer.test",
    "AUTH_JWT_SECRET": SECRET,
}


def definition(name: str, config_name: str, tenants: str | None = None) -> dict[str, str]:
    env = {
        f"DATASOURCE_{name}_CONFIG_NAME": config_name,
        f"DATASOURCE_{name}_TYPE": "postgresql",
        f"DATASOURCE_{name}_HOST": "db.internal.example",
        f"DATASOURCE_{name}_DATABASE": "ledger",
        f"DATASOURCE_{name}_USER": "ro",
        f"DATASOURCE_{name}_PASSWORD": "pw",
    }
    if tenants is not None:
        env[f"DATASOURCE_{name}_TENANTS"] = tenants
    return env


def test_the_section_12_6_vector() -> None:
    assert internal_connection_id("ledger", "acme") == "26097a1b-62bf-5285-9a22-faa02bfb913c"


def test_the_single_tenant_id_is_unchanged() -> None:
    assert internal_connection_id("midaz_onboarding") == "d23dda0c-5f1a-5d94-a584-ea056a9fa8c1"
    assert internal_connection_id("ledger", "") == internal_connection_id("ledger")


def test_tenants_are_parsed_trimmed_and_keyed_by_config_name() -> None:
    env = {
        **definition("LEDGER", "ledger", " acme, globex ,a"),
        **definition("OPS", "ops"),
        **definition("CRM", "crm", "z" * 63),
    }
    assert parse_internal_tenants(env, multi_tenant=True) == {
        "ledger": frozenset({"acme", "globex", "a"}),
        "crm": frozenset({"z" * 63}),
    }
    # TENANTS is a known suffix: it never becomes part of a <NAME>.
    assert list(parse_internal_datasources(env, embedded=False)) == ["crm", "ledger", "ops"]


@pytest.mark.parametrize(
    "tenants",
    [
        "Acme",  # upper case
        "acme,,globex",  # an empty item
        "-acme",  # must start with a letter or digit
        "_acme",
        "a" * 64,  # over 63 characters
        "acme!",  # fullmatch, not match: a valid prefix is not enough
        "ac me",
        "acme,glob.ex",
        "acmé",
    ],
)
def test_an_invalid_tenant_refuses_startup(tenants: str) -> None:
    env = {**BASE, "MULTI_TENANT_ENABLED": "true", **definition("LEDGER", "ledger", tenants)}
    with pytest.raises(StartupRefused) as caught:
        Settings.from_env(env)
    assert caught.value.reason.startswith("invalid internal datasource LEDGER: TENANTS ")


def test_tenants_are_ignored_in_single_tenant_mode() -> None:
    env = {**BASE, **definition("LEDGER", "ledger", "Not A Tenant!")}
    settings = Settings.from_env(env)
    assert settings.internal_tenants == {}
    assert list(settings.internal_datasources) == ["ledger"]
    assert parse_internal_tenants(definition("L", "ledger", "acme"), multi_tenant=False) == {}


def test_settings_carry_the_tenants_in_multi_tenant_mode() -> None:
    env = {**BASE, "MULTI_TENANT_ENABLED": "true", **definition("LEDGER", "ledger", "acme")}
    assert Settings.from_env(env).internal_tenants == {"ledger": frozenset({"acme"})}


def test_visibility_and_ids_per_tenant() -> None:
    env = {**definition("LEDGER", "ledger", "acme,globex"), **definition("OPS", "ops")}
    internal = parse_internal_datasources(env, embedded=False)
    tenants = parse_internal_tenants(env, multi_tenant=True)
    acme = visible_internal(internal, tenants, "acme")
    assert list(acme) == ["ledger"]
    assert acme["ledger"].connection_id == "26097a1b-62bf-5285-9a22-faa02bfb913c"
    globex = visible_internal(internal, tenants, "globex")
    assert globex["ledger"].connection_id == internal_connection_id("ledger", "globex")
    assert visible_internal(internal, tenants, "initech") == {}  # named by no TENANTS
    single = visible_internal(internal, tenants, "")
    assert sorted(single) == ["ledger", "ops"]
    assert single["ledger"].connection_id == internal_connection_id("ledger")
