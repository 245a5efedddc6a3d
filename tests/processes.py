"""Processes read from ``/proc`` (Linux): the tests that check which helper processes a
Fetcher process starts, that none outlives it, and how much memory it holds."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path


def descendants(pid: int) -> set[int]:
    """The live descendants of ``pid`` (from ``/proc/<pid>/task/<tid>/children``)."""
    found: set[int] = set()
    parents = [pid]
    while parents:
        parent = parents.pop()
        with suppress(OSError):
            for task in Path(f"/proc/{parent}/task").iterdir():
                with suppress(OSError):
                    for child in map(int, (task / "children").read_text().split()):
                        if child not in found:
                            found.add(child)
                            parents.append(child)
    return found


def command_line(pid: int) -> bytes:
    """``pid``'s command line, NUL-separated (empty once it has gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    """Running and not a zombie (a zombie has exited; only its parent has not reaped it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def status_kib(pid: int, key: str) -> int:
    """A ``/proc/<pid>/status`` figure in kiB (``VmRSS``, ``VmHWM``, …)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} line for pid {pid}")
