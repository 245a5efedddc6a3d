"""The image's entry point (deploy/container/fetcher-entrypoint), run on this host with the
real ``fetcher`` of the virtualenv: ``<NAME>_FILE`` secrets become ``NAME``; conflicts and
unreadable files refuse to start without showing any secret."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fetcher.crypto import generate_master_key
from tests.deploy.layout import ENTRYPOINT, VENV_BIN


def _run(args: list[str], extra_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(Path.home())}
    return subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [str(ENTRYPOINT), *args],
        env=env | extra_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_key_from_a_file_equals_the_key_from_the_environment(tmp_path: Path) -> None:
    key = generate_master_key()
    key_file = tmp_path / "app_enc_key"
    key_file.write_text(key + "\n")  # secret files usually end with a newline
    from_env = _run(["derive-key"], {"APP_ENC_KEY": key})
    from_file = _run(["derive-key"], {"APP_ENC_KEY_FILE": str(key_file)})
    assert from_env.returncode == 0, from_env.stderr
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout == from_env.stdout
    other = _run(["derive-key"], {"APP_ENC_KEY": generate_master_key()})
    assert other.stdout != from_file.stdout  # derive-key really depends on the key


def test_both_a_value_and_a_file_refuse_to_start(tmp_path: Path) -> None:
    key = generate_master_key()
    key_file = tmp_path / "key"
    key_file.write_text(key)
    result = _run(["derive-key"], {"APP_ENC_KEY": key, "APP_ENC_KEY_FILE": str(key_file)})
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "startup refused: set only one of APP_ENC_KEY and APP_ENC_KEY_FILE"
    )
    assert key not in result.stdout + result.stderr


def test_an_unreadable_file_is_named_but_never_shown(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    result = _run(["derive-key"], {"RABBITMQ_DEFAULT_PASS_FILE": str(missing)})
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"startup refused: RABBITMQ_DEFAULT_PASS_FILE: cannot read {missing}"
    )
    directory = _run(["derive-key"], {"DATABASE_URL_FILE": str(tmp_path)})
    assert directory.returncode == 1
    assert "DATABASE_URL_FILE: cannot read" in directory.stderr


def test_the_file_variable_does_not_reach_fetcher(tmp_path: Path) -> None:
    """``fetcher`` sees ``NAME`` only: the path variable is removed before the exec. Here
    ``fetcher`` is a script that prints the environment and arguments it was given."""
    printer = tmp_path / "fetcher"
    printer.write_text('#!/bin/sh\nenv\necho "ARGS=$*"\n')
    printer.chmod(0o755)
    secret = tmp_path / "s3"
    secret.write_text("s3-secret-value\n")
    result = subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [str(ENTRYPOINT), "run", "--now"],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "OBJECT_STORAGE_SECRET_KEY_FILE": str(secret)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    assert seen["OBJECT_STORAGE_SECRET_KEY"] == "s3-secret-value"
    assert "OBJECT_STORAGE_SECRET_KEY_FILE" not in seen
    assert seen["ARGS"] == "run --now"
