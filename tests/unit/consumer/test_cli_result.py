"""``fetcher result get`` on a local folder: writes exactly the verified bytes, or exits 3 and
writes nothing (the real-stack path is in tests/e2e/test_result_command.py)."""

from __future__ import annotations

import io
from pathlib import Path

from fetcher.cli import main
from fetcher.cli.events import events_command
from fetcher.cli.result import api_token, auth_hint, result_command
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
    assert main(["result"]) == 1
    assert main(["events"]) == 1


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
