"""Helpers the engine plugins share (not a plugin: it has no ``ENGINE``)."""

from __future__ import annotations

import secrets
import socket

from fetcher.engine.types import TypeFamily
from tests.contract.dataset import ColumnSpec, expected_json


def closed_port() -> int:
    """A loopback TCP port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def fresh_name(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(4)}"


def fresh_password() -> str:
    """A reader password with characters that need quoting in a DSN (never built here)."""
    return f"pw'{secrets.token_hex(8)}\"%;"


def default_expected(column: ColumnSpec, value: object) -> object:
    return expected_json(column.family, value)


ALL_FAMILIES = frozenset(TypeFamily) - {TypeFamily.ARRAY, TypeFamily.OTHER}
