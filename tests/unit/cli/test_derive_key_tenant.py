"""§12.5 ``fetcher derive-key --tenant <id>`` through the real console script (§12.6 vectors)."""

from __future__ import annotations

import pytest

from tests.unit.cli.test_keys_command import EXTERNAL, KEY, STORAGE, _run

TENANT_LINES = {
    ("acme", "external"): (
        "External HMAC Key (hex): 0b5dcfb07cc6607fdc334fa442c8dd5c42a4da50e592bb15abd28675b4bd211b"
    ),
    ("acme", "storage"): (
        "Storage Key (hex): bd147d917e899741617a3101824618d2a0464da70f0eb27225413aa7ec3e7465"
    ),
    ("globex", "external"): (
        "External HMAC Key (hex): 0a234fd73d4d0293b803aa8d991bc05c6104227f6e5f17a5a5d0298a59dd4604"
    ),
    ("globex", "storage"): (
        "Storage Key (hex): 67e526d7b7d069dbad51452ab8040b8563a94359d23792c8fe56816547422ed7"
    ),
}


def test_tenant_acme_prints_exactly_the_vector_line() -> None:
    done = _run("derive-key", "--tenant", "acme", env={"APP_ENC_KEY": KEY})
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        TENANT_LINES["acme", "external"] + "\n",
        "",
    )


@pytest.mark.parametrize(("tenant", "purpose"), sorted(TENANT_LINES))
def test_every_tenant_and_purpose(tenant: str, purpose: str) -> None:
    done = _run("derive-key", f"--tenant={tenant}", "--purpose", purpose, env={"APP_ENC_KEY": KEY})
    assert (done.returncode, done.stdout) == (0, TENANT_LINES[tenant, purpose] + "\n")


def test_tenant_with_the_other_key_sources() -> None:
    from_stdin = _run("derive-key", "--stdin", "--tenant", "acme", stdin=KEY + "\n")
    assert (from_stdin.returncode, from_stdin.stdout) == (
        0,
        TENANT_LINES["acme", "external"] + "\n",
    )
    from_flag = _run("derive-key", "--purpose=storage", "--key", KEY, "--tenant", "globex")
    assert (from_flag.returncode, from_flag.stdout) == (0, TENANT_LINES["globex", "storage"] + "\n")
    assert "visible to other users" in from_flag.stderr


def test_without_tenant_the_66_lines_are_unchanged() -> None:
    external = _run("derive-key", env={"APP_ENC_KEY": KEY})
    storage = _run("derive-key", "--purpose", "storage", env={"APP_ENC_KEY": KEY})
    assert (external.stdout, storage.stdout) == (EXTERNAL + "\n", STORAGE + "\n")


@pytest.mark.parametrize(
    "tenant", ["", "Acme", "-acme", "_x", "acme/x", "a" * 64, "acme ", "acme\n", "acmé"]
)
def test_a_tenant_breaking_the_pattern_is_a_usage_error(tenant: str) -> None:
    done = _run("derive-key", "--tenant", tenant, env={"APP_ENC_KEY": KEY})
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("usage: fetcher derive-key")


def test_tenant_without_a_value_is_a_usage_error() -> None:
    done = _run("derive-key", "--tenant", env={"APP_ENC_KEY": KEY})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("usage: fetcher derive-key")


def test_help_names_the_tenant_option() -> None:
    helped = _run("derive-key", "-h")
    assert helped.returncode == 0
    assert "--tenant <id>" in helped.stdout
