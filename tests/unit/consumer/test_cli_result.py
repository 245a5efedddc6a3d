"""``fetcher result get`` on a local folder: writes exactly the verified bytes, or exits 3 and
writes nothing (the real-stack path is in tests/e2e/test_result_command.py)."""

from __future__ import annotations

import io
from pathlib import Path

from fetcher.cli import main
from fetcher.cli.result import result_command
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
