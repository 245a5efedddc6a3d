"""Reading what a child process shows on a pseudo-terminal (the CLI's table mode)."""

from __future__ import annotations

import os
import select
import subprocess
import time


def read_terminal(
    master: int, process: subprocess.Popen[bytes], *, timeout: float = 60.0
) -> bytes | None:
    """What ``process`` writes to the terminal whose controller is ``master`` until it closes
    the terminal or exits; ``None`` when ``timeout`` seconds pass first."""
    shown = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return bytes(shown)
            if not chunk:
                return bytes(shown)
            shown += chunk
        elif process.poll() is not None:
            return bytes(shown)
    return None
