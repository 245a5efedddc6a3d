"""``fetcher dev-token``: an HS256 bearer token for trying a protected deployment (§12).

A developer convenience, not an identity provider: it signs with ``AUTH_JWT_SECRET`` (the
decoded bytes of its base64, as the Manager verifies, §12.2), sets ``iss`` to ``AUTH_ISSUER``
and ``aud`` to ``AUTH_AUDIENCE`` (default ``fetcher``), and names the tenant with the claim
``AUTH_TENANT_CLAIM`` (default ``tenantId``). It refuses to run without the secret or the
issuer. The token goes to stdout alone, so ``TOKEN=$(fetcher dev-token …)`` works.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import re
import sys
import time
import uuid
from typing import NoReturn, TextIO

import jwt

from fetcher.crypto import TENANT_PATTERN_TEXT, is_tenant_id
from fetcher.services.connections.validation import validate_product_header
from fetcher.services.errors import ApiError

__all__ = ["USAGE", "dev_token_command", "parse_ttl"]

USAGE = """\
usage: fetcher dev-token --sub <subject> --scope <scope>... [--product <name>...]
                         [--tenant <id>] [--ttl <duration>]

Print an HS256 bearer token signed with AUTH_JWT_SECRET, for trying a Manager that runs with
AUTH_MODE=jwt and the same secret. iss is AUTH_ISSUER, aud is AUTH_AUDIENCE (default fetcher).

options:
  --sub <subject>     the token's subject (recorded as createdBy)
  --scope <scope>     a scope (repeatable, or several separated by spaces): fetcher:admin,
                      fetcher:connections:read, fetcher:connections:write, fetcher:jobs:write,
                      fetcher:jobs:read, fetcher:events:read, fetcher:results:read
  --product <name>    restrict the token to a product (repeatable; none: unrestricted)
  --tenant <id>       the tenant, in the claim AUTH_TENANT_CLAIM (default tenantId)
  --ttl <duration>    lifetime: seconds, or a number with s, m, h or d (default 1h)
  -h, --help          show this help and exit
"""

_TTL = re.compile(r"([0-9]{1,7})([smhd]?)")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def parse_ttl(text: str) -> int:
    """``3600``, ``90s``, ``30m``, ``1h``, ``2d`` → seconds (> 0)."""
    match = _TTL.fullmatch(text.strip())
    if match is None or int(match[1]) == 0:
        raise _UsageError(f"invalid --ttl {text!r}")
    return int(match[1]) * _UNIT[match[2]]


def _parser() -> _Parser:
    parser = _Parser(prog="fetcher dev-token", add_help=False)
    parser.add_argument("--sub", required=True)
    parser.add_argument("--scope", action="append", required=True)
    parser.add_argument("--product", action="append")
    parser.add_argument("--tenant")
    parser.add_argument("--ttl", default="1h")
    return parser


def _claims(args: argparse.Namespace, env: dict[str, str], now: int) -> dict[str, object]:
    if not args.sub.strip() or len(args.sub) > 256:
        raise _UsageError("--sub must be 1 to 256 characters")
    claims: dict[str, object] = {
        "iss": env.get("AUTH_ISSUER", "").strip(),
        "aud": env.get("AUTH_AUDIENCE", "").strip() or "fetcher",
        "sub": args.sub,
        "iat": now,
        "exp": now + parse_ttl(args.ttl),
        "jti": str(uuid.uuid4()),
        "scope": " ".join(s for scope in args.scope for s in scope.split()),
    }
    if args.product is not None:
        try:
            claims["products"] = [validate_product_header(p, required=True) for p in args.product]
        except ApiError as exc:
            raise _UsageError(f"--product: {exc.message}") from None
    if args.tenant is not None:
        if not is_tenant_id(args.tenant):
            raise _UsageError(f"--tenant must match {TENANT_PATTERN_TEXT}")
        claims[env.get("AUTH_TENANT_CLAIM", "").strip() or "tenantId"] = args.tenant
    return claims


def _secret(env: dict[str, str]) -> bytes | None:
    """§9.1 ``AUTH_JWT_SECRET``: standard base64 of at least 32 bytes → the key bytes."""
    try:
        key = base64.b64decode(env.get("AUTH_JWT_SECRET", "").strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return key if len(key) >= 32 else None


def dev_token_command(
    argv: list[str],
    env: dict[str, str],
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
) -> int:
    if any(a in ("-h", "--help") for a in argv):
        stdout.write(USAGE)
        return 0
    secret = _secret(env)
    if secret is None:
        stderr.write(
            "error: dev-token signs with AUTH_JWT_SECRET: set it to the standard base64 of at "
            "least 32 bytes (the Manager's AUTH_JWT_SECRET)\n"
        )
        return 1
    if not env.get("AUTH_ISSUER", "").strip():
        stderr.write("error: dev-token needs AUTH_ISSUER (the Manager's AUTH_ISSUER)\n")
        return 1
    try:
        claims = _claims(_parser().parse_args(argv), env, int(time.time()))
    except _UsageError as exc:
        stderr.write(f"error: {exc}\n{USAGE}")
        return 1
    stdout.write(jwt.encode(claims, secret, algorithm="HS256") + "\n")
    return 0
