"""``run``, ``demo`` and ``generate-master-key`` answer ``--help`` without doing their work and
refuse an argument they do not know (before, ``fetcher demo --help`` ran the demo and
``generate-master-key --help`` printed a new key)."""

from __future__ import annotations

import pytest

from fetcher.cli import main


@pytest.mark.parametrize("command", ["run", "demo", "generate-master-key"])
def test_help_prints_usage_and_does_nothing_else(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: fetcher {command} [-h]")
    assert "==" not in out  # no demo step ran
    assert "=\n" not in out  # no base64 key was printed


@pytest.mark.parametrize("command", ["run", "demo", "generate-master-key"])
def test_an_unknown_argument_is_a_usage_error(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--bogus"]) == 2
    err = capsys.readouterr().err
    assert f"fetcher {command}: error: unrecognized arguments: --bogus" in err


def test_demo_help_names_keep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--help"]) == 0
    assert "--keep" in capsys.readouterr().out


def test_generate_master_key_still_prints_a_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate-master-key"]) == 0
    key = capsys.readouterr().out
    assert key.endswith("=\n")
    assert len(key.strip()) == 44
