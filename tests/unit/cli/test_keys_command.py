"""§6.5 ``fetcher derive-key`` and §1.5 ``generate-master-key``, through the real console script."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
EXTERNAL = (
    "External HMAC Key (hex): 7fada934843cf2ac1b71dd13e1f06296c04bc538671c66c571ab606d2c28e8d7"
)
STORAGE = "Storage Key (hex): 381c26d1db0224dbe2755393c835fcc5b968e050659cae102ebfcb0779a2d777"
FETCHER = str(Path(sys.executable).with_name("fetcher"))


def _run(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "APP_ENC_KEY"}
    return subprocess.run(  # noqa: S603 - our own console script
        [FETCHER, *args],
        env={**base, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_env_key_prints_exactly_the_vector_line() -> None:
    done = _run("derive-key", env={"APP_ENC_KEY": f"  {KEY}\n"})
    assert (done.returncode, done.stdout, done.stderr) == (0, EXTERNAL + "\n", "")


def test_storage_purpose() -> None:
    done = _run("derive-key", "--purpose", "storage", env={"APP_ENC_KEY": KEY})
    assert (done.returncode, done.stdout) == (0, STORAGE + "\n")


def test_key_flag_wins_and_warns() -> None:
    other = base64.b64encode(b"\x01" * 32).decode()
    done = _run("derive-key", "--key", KEY, env={"APP_ENC_KEY": other})
    assert (done.returncode, done.stdout) == (0, EXTERNAL + "\n")
    assert "visible to other users" in done.stderr


def test_stdin_only_with_the_flag() -> None:
    done = _run("derive-key", "--stdin", stdin=KEY + "\nignored\n")
    assert (done.returncode, done.stdout) == (0, EXTERNAL + "\n")
    unasked = _run("derive-key", stdin=KEY + "\n")
    assert unasked.returncode == 1
    assert unasked.stdout == ""
    assert "usage" in unasked.stderr


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("not base64!", "invalid master key (base64)"),
        (
            base64.b64encode(b"x" * 31).decode(),
            "master key too short: got 31 bytes, minimum 32 required",
        ),
    ],
)
def test_invalid_keys_print_the_reason_and_a_hint(key: str, reason: str) -> None:
    done = _run("derive-key", env={"APP_ENC_KEY": key})
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0] == f"Error: {reason}"
    assert len(lines) == 2


def test_help_goes_to_stdout_and_bad_purpose_is_a_usage_error() -> None:
    helped = _run("derive-key", "--help")
    assert helped.returncode == 0
    assert "usage" in helped.stdout
    bad = _run("derive-key", "--purpose", "credentials", env={"APP_ENC_KEY": KEY})
    assert bad.returncode == 1
    assert bad.stdout == ""


def test_generate_master_key_is_32_random_bytes() -> None:
    first, second = _run("generate-master-key"), _run("generate-master-key")
    assert first.returncode == 0
    assert first.stdout.endswith("\n")
    assert len(base64.b64decode(first.stdout.strip(), validate=True)) == 32
    assert first.stdout != second.stdout
