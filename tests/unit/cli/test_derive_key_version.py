"""§14.3 ``fetcher derive-key --version <v>`` (through the real console script) and the key
choice of ``result get`` by a job's key version: the §6.6 master key as the previous version 1,
another key current as version 2."""

from __future__ import annotations

import pytest

from fetcher.cli.result import ConfigError, consumer_keys
from fetcher.crypto import KeySet
from tests.unit.cli.test_keys_command import EXTERNAL, KEY, STORAGE, _run

NEW = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="
ROTATED = {"APP_ENC_KEY": NEW, "APP_ENC_KEY_VERSION": "2", "APP_ENC_KEY_PREVIOUS": f"1:{KEY}"}


@pytest.mark.parametrize(("purpose", "line"), [("external", EXTERNAL), ("storage", STORAGE)])
def test_a_previous_version_prints_the_old_keys(purpose: str, line: str) -> None:
    done = _run("derive-key", "--version", "1", "--purpose", purpose, env=ROTATED)
    assert (done.returncode, done.stdout, done.stderr) == (0, line + "\n", "")


def test_the_current_version_is_app_enc_key() -> None:
    done = _run("derive-key", "--version=2", "--purpose", "storage", env=ROTATED)
    assert done.returncode == 0
    assert done.stdout == f"Storage Key (hex): {KeySet.from_text(NEW).storage.hex()}\n"
    default = _run("derive-key", "--version", "1", env={"APP_ENC_KEY": KEY})  # version 1 default
    assert default.stdout == EXTERNAL + "\n"


def test_an_unknown_version_and_a_mixed_source_are_refused() -> None:
    unknown = _run("derive-key", "--version", "3", env=ROTATED)
    assert unknown.returncode == 1
    assert unknown.stdout == ""
    assert unknown.stderr == (
        "Error: no master key of version 3 (APP_ENC_KEY_VERSION or APP_ENC_KEY_PREVIOUS)\n"
    )
    mixed = _run("derive-key", "--version", "1", "--key", KEY, env=ROTATED)
    assert mixed.returncode == 1
    assert mixed.stderr.startswith("usage: fetcher derive-key")


def test_result_get_picks_the_master_key_of_the_jobs_version() -> None:
    old, new = KeySet.from_text(KEY), KeySet.from_text(NEW)
    assert consumer_keys(ROTATED, None, "1").storage == old.storage
    assert consumer_keys(ROTATED, None, "2").external_hmac == new.external_hmac
    assert consumer_keys(ROTATED, None, None).storage == new.storage
    with pytest.raises(ConfigError, match="key version 7"):
        consumer_keys(ROTATED, None, "7")
