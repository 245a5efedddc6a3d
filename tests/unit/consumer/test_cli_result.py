"""``fetcher result get`` on a local folder: writes exactly the verified bytes, or exits 3 and
writes nothing (the real-stack path is in tests/e2e/test_result_command.py)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from fetcher.cli import main
from fetcher.cli.events import events_command
from fetcher.cli.result import (
    TOKEN_FILE_MAX_BYTES,
    ConfigError,
    TokenFile,
    api_token,
    auth_hint,
    result_command,
)
from fetcher.client import AuthenticationError, PermissionDeniedError
from fetcher.consumer import ConsumerKeys
from tests.unit.consumer.conftest import MASTER_KEY, document_bytes, store_document

KEYS = ConsumerKeys.from_master(MASTER_KEY)


def env_for(root: Path) -> dict[str, str]:
    assert KEYS.storage is not None
    return {
        "OBJECT_STORAGE_LOCAL_DIR": str(root),
        "FETCHER_EXTERNAL_KEY": f"External HMAC Key (hex): {KEYS.external_hmac.hex()}",
        "FETCHER_STORAGE_KEY": KEYS.storage.hex(),
    }


def test_writes_the_verified_document(tmp_path: Path) -> None:
    plain = document_bytes({"pg": {"t": [{"a": 1, "b": "ü"}]}})
    key, mac = store_document(tmp_path, KEYS, plain)
    out = tmp_path / "out.json"
    stderr = io.StringIO()
    argv = ["get", key, "--hmac", mac, "-o", str(out)]
    assert result_command(argv, env_for(tmp_path), stderr=stderr) == 0
    assert out.read_bytes() == plain
    assert stderr.getvalue() == ""  # not a terminal: no progress
    stdout = io.BytesIO()
    assert result_command(["get", key, "--hmac", mac], env_for(tmp_path), stdout=stdout) == 0
    assert stdout.getvalue() == plain


def test_integrity_failure_exits_3_and_writes_nothing(tmp_path: Path) -> None:
    plain = document_bytes({"pg": {"t": [{"a": 1}]}})
    key, mac = store_document(tmp_path, KEYS, plain)
    stored = tmp_path / key
    stored.write_bytes(stored.read_bytes()[:-4])
    out = tmp_path / "out.json"
    stderr = io.StringIO()
    code = result_command(
        ["get", key, "--hmac", mac, "-o", str(out)], env_for(tmp_path), stderr=stderr
    )
    assert code == 3
    assert "integrity check failed" in stderr.getvalue()
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.json")] == []


def test_usage_and_configuration_errors(tmp_path: Path) -> None:
    stderr = io.StringIO()
    assert result_command(["get", "external-data/x.json"], env_for(tmp_path), stderr=stderr) == 1
    assert "--hmac" in stderr.getvalue()
    assert result_command(["get", "k", "--hmac", "00"], {}, stderr=io.StringIO()) == 1
    assert (
        result_command(
            ["get", "external-data/none.json", "--hmac", "0" * 64],
            env_for(tmp_path),
            stderr=io.StringIO(),
        )
        == 2
    )
    assert main(["result"]) == 2  # no subcommand: a usage error, argparse's code
    assert main(["events"]) == 2


def test_the_api_token_comes_from_the_flag_then_fetcher_token() -> None:
    env = {"FETCHER_TOKEN": "from-env\n", "FETCHER_API_TOKEN": "older"}
    assert api_token("flag", env) == "flag"
    assert api_token(None, env) == "from-env"  # a file's newline dropped
    assert api_token(None, {"FETCHER_API_TOKEN": "older"}) == "older"
    assert api_token(None, {"FETCHER_TOKEN": "  "}) is None
    assert api_token(None, {}) is None


def test_an_unusable_token_is_a_usage_error_that_does_not_show_it(tmp_path: Path) -> None:
    job_id = "0190a1b2-0000-7000-8000-000000000001"
    env = {**env_for(tmp_path), "FETCHER_TOKEN": "two words"}
    for command, argv in (
        (result_command, ["get", job_id, "--api", "http://127.0.0.1:9"]),
        (events_command, ["tail", "--feed", "http://127.0.0.1:9", "--count", "1"]),
    ):
        stderr = io.StringIO()
        assert command(argv, env, stderr=stderr) == 1
        assert "FETCHER_TOKEN (or --token) is not a bearer token" in stderr.getvalue()
        assert "two words" not in stderr.getvalue()


def test_the_hint_names_the_variable_only_for_a_401() -> None:
    unauthorized = AuthenticationError(401, "FET-0010", "Unauthorized", "missing or invalid")
    assert "set FETCHER_TOKEN" in auth_hint(unauthorized, None, {})
    refused = auth_hint(unauthorized, None, {"FETCHER_TOKEN": "t0ken"})
    assert "refused the token" in refused
    assert "t0ken" not in refused
    forbidden = PermissionDeniedError(403, "FET-0011", "Forbidden", "token lacks scope x")
    assert auth_hint(forbidden, "t0ken", {}) == ""


# --- token files (--token-file, FETCHER_TOKEN_FILE) -------------------------------------------


def test_token_sources_in_order_and_a_file_read_on_every_call(tmp_path: Path) -> None:
    flag_file, env_file = tmp_path / "flag.jwt", tmp_path / "env.jwt"
    flag_file.write_text("from-flag-file\n")
    env_file.write_text("  from-env-file  \n")
    env = {"FETCHER_TOKEN_FILE": str(env_file), "FETCHER_API_TOKEN": "older"}
    assert api_token("flag", env, explicit_file=str(flag_file)) == "flag"
    from_flag = api_token(None, {**env, "FETCHER_TOKEN": "t"}, explicit_file=str(flag_file))
    assert isinstance(from_flag, TokenFile)
    assert from_flag() == "from-flag-file"
    assert api_token(None, {**env, "FETCHER_TOKEN": "t"}) == "t"
    from_env = api_token(None, env)
    assert isinstance(from_env, TokenFile)
    assert from_env() == "from-env-file"
    env_file.write_text("rotated\n")  # a rotated token is what the next request sends
    assert from_env() == "rotated"
    assert api_token(None, {"FETCHER_TOKEN_FILE": " ", "FETCHER_API_TOKEN": "older"}) == "older"


def test_an_unusable_token_file_fails_at_the_start_naming_only_its_path(tmp_path: Path) -> None:
    oversize = tmp_path / "big.jwt"
    oversize.write_text("a" * (TOKEN_FILE_MAX_BYTES + 1))
    wrong = tmp_path / "wrong.jwt"
    wrong.write_text("two words\n")
    binary = tmp_path / "binary.jwt"
    binary.write_bytes(b"\xff\xfe")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # a reader would block on it until a writer came
    cases = {
        tmp_path / "missing.jwt": "cannot read the token file",
        tmp_path: "is not a regular file",
        fifo: "is not a regular file",
        Path("/dev/zero"): "is not a regular file",  # a read would never end
        oversize: f"exceeds {TOKEN_FILE_MAX_BYTES} bytes",
        wrong: "holds no bearer token",
        binary: "holds no bearer token",
    }
    for path, message in cases.items():
        with pytest.raises(ConfigError) as refused:
            api_token(None, {"FETCHER_TOKEN_FILE": str(path)})
        assert message in str(refused.value), path
        assert str(path) in str(refused.value)
        assert "two words" not in str(refused.value)


def test_a_token_file_that_breaks_mid_run_ends_the_command_with_its_error(tmp_path: Path) -> None:
    token_file = tmp_path / "token.jwt"
    token_file.write_text("good-token\n")
    source = api_token(None, {}, explicit_file=str(token_file))
    assert callable(source)
    token_file.unlink()
    with pytest.raises(ConfigError, match="cannot read the token file"):
        source()


def test_the_commands_take_a_token_file(tmp_path: Path) -> None:
    job_id = "0190a1b2-0000-7000-8000-000000000001"
    token_file = tmp_path / "token.jwt"
    token_file.write_text("two words")
    for command, argv in (
        (result_command, ["get", job_id, "--api", "http://127.0.0.1:9"]),
        (events_command, ["tail", "--feed", "http://127.0.0.1:9", "--count", "1"]),
    ):
        stderr = io.StringIO()
        assert (
            command([*argv, "--token-file", str(token_file)], env_for(tmp_path), stderr=stderr) == 1
        )
        assert f"the token file {token_file} holds no bearer token" in stderr.getvalue()
        assert "two words" not in stderr.getvalue()


def test_the_hint_counts_a_token_file_as_a_token() -> None:
    unauthorized = AuthenticationError(401, "FET-0010", "Unauthorized", "missing or invalid")
    assert "refused the token" in auth_hint(unauthorized, None, {"FETCHER_TOKEN_FILE": "/t"})
    assert "refused the token" in auth_hint(unauthorized, "/path/of/--token-file", {})
