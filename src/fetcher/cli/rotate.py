"""``fetcher rotate-credentials`` (contract §14.3, docs/key-rotation.md).

Run with a Manager's environment after ``APP_ENC_KEY`` was rotated (the new key and version
current, the old one in ``APP_ENC_KEY_PREVIOUS``): every stored password and ``ssl.key`` of every
tenant is re-encrypted under the current key. Prints
``re-encrypted <n> connections; <m> changed meanwhile; <f> failed``; exit 0, or 1 when a row
failed (its version has no key, or it does not decrypt: the log names its ID, never a value)
or the settings are refused.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import TextIO

from fetcher.bootstrap import rotate_credentials
from fetcher.cli.arguments import parse_or_exit_code
from fetcher.cli.run import configured_settings, startup_refused
from fetcher.settings import StartupRefused

__all__ = ["rotate_credentials_command"]


def rotate_credentials_command(
    argv: Sequence[str], env: dict[str, str], stdout: TextIO | None = None
) -> int:
    parsed = parse_or_exit_code(
        "fetcher rotate-credentials",
        "Re-encrypt every stored connection credential under the current APP_ENC_KEY "
        "(APP_ENC_KEY_VERSION), reading older ones with APP_ENC_KEY_PREVIOUS. Run it with a "
        "Manager's environment (docs/key-rotation.md).",
        argv,
    )
    if isinstance(parsed, int):
        return parsed
    try:
        report = asyncio.run(rotate_credentials(configured_settings(env)))
    except StartupRefused as refusal:
        return startup_refused(refusal)
    (stdout or sys.stdout).write(
        f"re-encrypted {report.rekeyed} connections; {report.raced} changed meanwhile; "
        f"{report.failed} failed\n"
    )
    return 1 if report.failed else 0
