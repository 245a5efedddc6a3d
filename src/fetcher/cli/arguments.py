"""Argument parsing shared by the commands that take few or no options (``run``, ``demo``,
``generate-master-key``): ``--help`` prints the command's help and exits 0 without doing its
work, and an unknown argument is a usage error (exit 2) instead of being ignored."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

__all__ = ["parse_or_exit_code"]


def parse_or_exit_code(
    prog: str,
    description: str,
    argv: Sequence[str],
    add_options: Callable[[argparse.ArgumentParser], object] = lambda _parser: None,
) -> argparse.Namespace | int:
    """The parsed ``argv``, or the exit code when argparse has already answered (0 after
    ``--help``, 2 after printing a usage error)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_options(parser)
    try:
        return parser.parse_args(list(argv))
    except SystemExit as answered:
        return int(answered.code or 0)
