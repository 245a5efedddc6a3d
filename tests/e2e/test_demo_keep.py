"""Issue 33, item 7: ``fetcher demo`` (the installed CLI, a real process) leaves nothing
behind, and ``fetcher demo --keep`` prints what the client commands need — the throwaway
master key (or that it uses ``APP_ENC_KEY``), the derived external and storage keys, the
object folder and the exact commands — and those commands, run as printed in a shell, work
against it: ``jobs list``, ``events tail``, ``result get`` and the consumer kit. Ctrl-C
(SIGINT) or SIGTERM ends it and removes its folder.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fetcher.consumer import ConsumerKeys
from tests.e2e.harness import FETCHER_BIN, MASTER_KEY

pytestmark = pytest.mark.integration

BIN = str(Path(FETCHER_BIN).parent)
SERVING = "== --keep: serving until Ctrl-C (then the folder is removed)"


def demo_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A user's shell: the venv's ``fetcher`` on PATH, temporary files under ``tmp_path``."""
    return {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path / "tmp"),
        **extra,
    }


def leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "tmp").iterdir())


class KeptDemo:
    """``fetcher demo --keep`` in the background, its stdout collected line by line."""

    def __init__(self, env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(  # noqa: S603 - our own console script, fixed argv
            [FETCHER_BIN, "demo", "--keep"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def instructions(self, within: float = 120) -> list[str]:
        """The block printed under the ``--keep`` title, once it is complete."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if SERVING in self.lines:
                block = self.lines[self.lines.index(SERVING) + 1 :]
                if any(line.startswith("API docs:") for line in block):
                    return block
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        self.process.kill()
        pytest.fail("the demo did not reach --keep:\n" + "\n".join(self.lines[-40:]))

    def stop(self, sig: int) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(60)
        self._reader.join(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return code


def _shell_lines(block: list[str]) -> list[str]:
    """The commands printed for "another shell" (the indented lines after that heading)."""
    start = block.index("In another shell (the derived keys, never the master key):") + 1
    commands = []
    for line in block[start:]:
        if not line.startswith("  "):
            break
        commands.append(line.strip())
    return commands


def test_demo_removes_its_folder_and_never_prints_a_given_master_key(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    run = subprocess.run(  # noqa: S603 - our own console script, fixed argv
        [FETCHER_BIN, "demo"],
        env=demo_env(tmp_path, APP_ENC_KEY=MASTER_KEY),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert "demo finished: every step passed." in run.stdout
    # The walk's output is the demo's own: no client request lines between its steps.
    assert '"logger": "httpx"' not in run.stdout + run.stderr
    assert MASTER_KEY not in run.stdout + run.stderr
    assert leftovers(tmp_path) == []


def test_keep_prints_what_the_commands_need_and_they_work_as_printed(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    demo = KeptDemo(demo_env(tmp_path))
    try:
        block = demo.instructions()
        shell = _shell_lines(block)
        master = re.fullmatch(
            r"throwaway master key \(this run only\): APP_ENC_KEY=(\S+)", block[0]
        )
        assert master is not None, block[0]
        exports = dict(
            line.removeprefix("export ").split("=", 1)
            for line in shell
            if line.startswith("export ")
        )
        keys = ConsumerKeys.from_master(master.group(1))
        assert keys.storage is not None
        assert exports["FETCHER_EXTERNAL_KEY"] == keys.external_hmac.hex()
        assert exports["FETCHER_STORAGE_KEY"] == keys.storage.hex()
        folder = Path(exports["OBJECT_STORAGE_LOCAL_DIR"])
        assert block[1] == f"object folder: {folder}"
        assert folder.is_dir()
        assert folder.parent.parent == tmp_path / "tmp"

        work = tmp_path / "user"
        work.mkdir()
        script = "set -e\n" + "\n".join(
            f"{line} > out-{n}.txt" if line.startswith("fetcher ") else line
            for n, line in enumerate(shell)
        )
        ran = subprocess.run(  # noqa: S603 - bash runs the lines the demo printed
            ["/bin/bash", "-c", script],
            cwd=work,
            env=demo_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        job_id = re.search(r"fetcher result get (\S+) -o result.json", script)
        assert job_id is not None
        outputs = {
            line: (work / f"out-{n}.txt").read_text()
            for n, line in enumerate(shell)
            if line.startswith("fetcher ")
        }
        assert job_id.group(1) in outputs["fetcher jobs list"]
        tail = outputs['fetcher events tail --feed "$FETCHER_API_URL" --from-start --count 1']
        assert f" completed {job_id.group(1)} rows=495 " in tail
        assert (work / "result.json").read_text().startswith('{\n  "demo_ledger": {')

        kit = _consumer_kit(block, exports, job_id.group(1), work, tmp_path)
        assert kit == "495 rows verified\n"
    finally:
        code = demo.stop(signal.SIGINT)  # Ctrl-C
    assert code == 0, "\n".join(demo.lines[-20:])
    assert demo.lines[-1] == f"stopped; {folder.parent} removed."
    assert not folder.parent.exists()
    assert leftovers(tmp_path) == []


def _consumer_kit(
    block: list[str], exports: dict[str, str], job_id: str, work: Path, tmp_path: Path
) -> str:
    """The printed consumer-kit lines in a synchronous program, with the printed variables."""
    start = block.index("The consumer kit (Python), with the same variables:") + 1
    printed = []
    for line in block[start:]:
        if not line.startswith("  "):
            break
        printed.append(line[2:])
    program = "\n".join(
        [
            "import os, sys",
            "from fetcher.client import FetcherClient",
            "from fetcher.consumer import ConsumerKeys, LocalFolderSource, open_result_sync",
            *printed,
            "with FetcherClient(os.environ['FETCHER_API_URL']) as api:",
            "    job = api.get_job(sys.argv[1])",
            "with open_result_sync(job, source, keys) as result:",
            "    print(sum(1 for _ in result.rows()), 'rows verified')",
        ]
    )
    ran = subprocess.run(  # noqa: S603 - the test's interpreter runs the printed lines
        [sys.executable, "-c", program, job_id],
        cwd=work,
        env={**demo_env(tmp_path), **exports},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


def test_keep_with_app_enc_key_says_so_and_sigterm_removes_the_folder(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    demo = KeptDemo(demo_env(tmp_path, APP_ENC_KEY=MASTER_KEY))
    try:
        block = demo.instructions()
        assert block[0] == "master key: APP_ENC_KEY from your environment (not printed)"
        external = ConsumerKeys.from_master(MASTER_KEY).external_hmac.hex()
        assert f"export FETCHER_EXTERNAL_KEY={external}" in [line.strip() for line in block]
    finally:
        code = demo.stop(signal.SIGTERM)
    assert code == 0
    assert all(MASTER_KEY not in line for line in demo.lines)
    assert leftovers(tmp_path) == []
    assert os.listdir(tmp_path / "tmp") == []
