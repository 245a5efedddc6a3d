"""``fetcher migrate [--check | --dry-run]``: the metadata store's migrations as their own step
(contract §15.4), so a team can run them as a Kubernetes Job before a rollout.

It reads ``DATABASE_URL`` only (a ``postgresql://``, ``postgres://`` or ``sqlite:`` URL) and
runs the very method a starting process runs (:meth:`StoreLifecycle.migrate`): the same
transaction behind the same lock (PostgreSQL: the migration advisory lock; SQLite:
``BEGIN EXCLUSIVE``), so it cannot race a Manager that starts at the same time; whichever
comes second finds nothing to do.

Output (stdout): one ``applied <file>`` line per migration applied, then one summary line.
``--check`` (alias ``--dry-run``) changes nothing: one ``pending <file>`` line per migration
still to apply, then the summary. Versions the ledger records that this release does not ship
(a newer release applied them, §15.4) are named on stderr. Exit codes: 0 done / nothing
pending; 3 ``--check`` found pending migrations; 1 the store failed or the URL is unusable
(one ``migrate failed: <reason>`` line on stderr, never the URL); 2 a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from fetcher.bootstrap import metadata_store
from fetcher.cli.arguments import parse_or_exit_code
from fetcher.services.store_roles import MigrationStatus, StoreError

__all__ = ["EXIT_FAILED", "EXIT_PENDING", "migrate_command"]

EXIT_FAILED = 1
#: ``--check``: migrations are pending (distinct from a failure, 1, and a usage error, 2).
EXIT_PENDING = 3

_SCHEMES = ("postgresql", "postgres", "sqlite")


class _Unusable(Exception):
    """``DATABASE_URL`` is missing or names no supported store."""


def migrate_command(argv: Sequence[str], env: dict[str, str]) -> int:
    parsed = parse_or_exit_code(
        "fetcher migrate",
        "Apply the metadata store's pending migrations (DATABASE_URL) and exit: the same "
        "migrations, under the same lock, as a starting Manager. With --check (or --dry-run) "
        "change nothing, list the pending ones, and exit 3 if there are any.",
        argv,
        _options,
    )
    if isinstance(parsed, int):
        return parsed
    try:
        url = _database_url(env)
        return asyncio.run(_check(url) if parsed.check else _migrate(url))
    except (_Unusable, StoreError) as failure:
        sys.stderr.write(f"migrate failed: {failure}\n")
        return EXIT_FAILED


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        "--dry-run",
        dest="check",
        action="store_true",
        help="change nothing; list pending migrations; exit 3 if any, 0 if none",
    )


def _database_url(env: dict[str, str]) -> str:
    url = env.get("DATABASE_URL", "").strip()
    if not url:
        raise _Unusable("DATABASE_URL is required")
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme not in _SCHEMES:
        raise _Unusable("unsupported DATABASE_URL scheme")
    return url


async def _migrate(url: str) -> int:
    async with metadata_store(url) as store:
        applied = await store.migrate()
        status = await store.migration_status()
    for name in applied:
        sys.stdout.write(f"applied {name}\n")
    _warn_unknown(status)
    count = f"{len(applied)} migration{'' if len(applied) == 1 else 's'} applied"
    sys.stdout.write(f"metadata store schema at version {status.version} ({count})\n")
    return 0


async def _check(url: str) -> int:
    async with metadata_store(url) as store:
        status = await store.migration_status()
    for name in status.pending:
        sys.stdout.write(f"pending {name}\n")
    _warn_unknown(status)
    if status.pending:
        count = len(status.pending)
        sys.stdout.write(
            f"metadata store schema at version {status.version}"
            f" ({count} migration{'' if count == 1 else 's'} pending)\n"
        )
        return EXIT_PENDING
    sys.stdout.write(f"metadata store schema at version {status.version} (up to date)\n")
    return 0


def _warn_unknown(status: MigrationStatus) -> None:
    if status.unknown:
        versions = ", ".join(f"{v:04d}" for v in status.unknown)
        sys.stderr.write(
            f"warning: the store has migrations this release does not ship ({versions}):"
            " a newer release applied them (docs/upgrades.md, rolling back)\n"
        )
