"""``fetcher derive-key`` and ``fetcher generate-master-key`` (contract §6.5, §12.5, §1.5)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from fetcher.cli.arguments import parse_or_exit_code
from fetcher.cli.key_versions import master_key_text
from fetcher.crypto import (
    KeySet,
    MasterKeyError,
    generate_master_key,
    is_tenant_id,
    parse_master_key,
)

__all__ = ["DERIVE_KEY_USAGE", "derive_key_command", "generate_master_key_command"]

DERIVE_KEY_USAGE = """\
usage: fetcher derive-key [--key <base64>] [--stdin] [--purpose external|storage]
                          [--tenant <id>] [--version <v>]

Print a key derived from the Fetcher master key (APP_ENC_KEY), so that consumers can verify
events and result HMACs (external) or decrypt result objects (storage) without holding the
master key. With --tenant, print that tenant's key (multi-tenant mode): it verifies and
decrypts only that tenant's events and results.

The master key is taken from, in order: --key <base64>; the first line of standard input when
--stdin is given; the APP_ENC_KEY environment variable. With --version, the master key of
that version: APP_ENC_KEY when it is APP_ENC_KEY_VERSION (default 1), else the entry <v> of
APP_ENC_KEY_PREVIOUS (results sealed before a rotation, docs/key-rotation.md).

options:
  --key <base64>      the master key (visible to other users of this machine, e.g. in ps)
  --stdin             read the master key from the first line of standard input
  --purpose <name>    external (default): the external HMAC key; storage: the storage key
  --tenant <id>       the tenant (^[a-z0-9][a-z0-9_-]{0,62}$) whose key to print
  --version <v>       derive from the master key of key version <v> (not with --key/--stdin)
  -h, --help          show this help and exit
"""

_PURPOSES = {"external": "External HMAC Key (hex)", "storage": "Storage Key (hex)"}


def _usage_error(stderr: TextIO) -> int:
    stderr.write(DERIVE_KEY_USAGE)
    return 1


def _parse(argv: list[str], stdout: TextIO, stderr: TextIO) -> dict[str, str | bool] | int:
    options: dict[str, str | bool] = {"purpose": "external", "stdin": False}
    args = iter(argv)
    for arg in args:
        if arg in ("-h", "--help"):
            stdout.write(DERIVE_KEY_USAGE)
            return 0
        if arg == "--stdin":
            options["stdin"] = True
        elif arg in ("--key", "--purpose", "--tenant", "--version"):
            value = next(args, None)
            if value is None:
                return _usage_error(stderr)
            options[arg[2:]] = value
        elif arg.startswith(("--key=", "--purpose=", "--tenant=", "--version=")):
            name, _, value = arg[2:].partition("=")
            options[name] = value
        else:
            return _usage_error(stderr)
    return options if _valid(options) else _usage_error(stderr)


def _valid(options: dict[str, str | bool]) -> bool:
    """A known purpose, a tenant of the §12.5 pattern, ``--version`` alone as the source."""
    if options["purpose"] not in _PURPOSES:
        return False
    if "tenant" in options and not is_tenant_id(options["tenant"]):
        return False
    return not ("version" in options and ("key" in options or options["stdin"]))


def derive_key_command(
    argv: list[str],
    env: dict[str, str],
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
) -> int:
    """§6.5: key source precedence ``--key`` > ``--stdin`` > ``APP_ENC_KEY``."""
    options = _parse(argv, stdout, stderr)
    if isinstance(options, int):
        return options
    text: str | None = None
    if isinstance(options.get("version"), str):  # §14.3
        version = str(options["version"])
        text = master_key_text(env, version)
        if text is None:
            stderr.write(
                f"Error: no master key of version {version} "
                "(APP_ENC_KEY_VERSION or APP_ENC_KEY_PREVIOUS)\n"
            )
            return 1
    elif isinstance(options.get("key"), str):
        stderr.write(
            "warning: a key given on the command line is visible to other users of this "
            "machine (for example through ps); prefer --stdin or APP_ENC_KEY\n"
        )
        text = str(options["key"])
    elif options["stdin"]:
        text = stdin.readline().strip() or None
    elif env.get("APP_ENC_KEY", "").strip():
        text = env["APP_ENC_KEY"].strip()
    if not text:
        return _usage_error(stderr)
    try:
        keys = KeySet.from_master(parse_master_key(text))
    except MasterKeyError as exc:
        stderr.write(f"Error: {exc.reason}\n")
        stderr.write(
            "hint: the master key is standard base64 (with padding) of at least 32 bytes\n"
        )
        return 1
    purpose = str(options["purpose"])
    keys = keys.for_tenant(str(options.get("tenant", "")))  # §12.5; "" is the global set
    key = keys.external_hmac if purpose == "external" else keys.storage
    stdout.write(f"{_PURPOSES[purpose]}: {key.hex()}\n")
    return 0


def generate_master_key_command(argv: Sequence[str] = (), stdout: TextIO | None = None) -> int:
    """§1.5: standard base64 (with padding) of 32 random bytes, then a newline."""
    parsed = parse_or_exit_code(
        "fetcher generate-master-key",
        "Print a new random master key (APP_ENC_KEY): the standard base64 of 32 random bytes.",
        argv,
    )
    if isinstance(parsed, int):
        return parsed
    (stdout or sys.stdout).write(generate_master_key() + "\n")
    return 0
