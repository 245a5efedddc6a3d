"""``fetcher jobs list``: find jobs through the Manager's ``GET /v1/fetcher`` (issue 21).

    fetcher jobs list --status failed --since 1h
    fetcher jobs list --product payments --connection <id> --json | jq .id

Filters: ``--status`` (one or more states, comma-separated), ``--connection ID``, ``--since``
and ``--until`` (a duration back from now such as ``30m``, ``1h``, ``2d``, ``1w``; or a
``YYYY-MM-DD`` date or an RFC 3339 date-time, passed as is), ``--product`` (sent as
``X-Product-Name``). ``--limit N`` stops after N jobs (default 50, ``0`` for every one); pages
are followed through the cursor as the output needs them.

Output: a table (created, ID, status, product, completed, error) on a terminal; JSON lines (one
compact, ASCII-escaped job per line, the API's item shape) when the output is piped, or with
``--json``. Every server value printed in the table goes through
:func:`fetcher.cli.terminal.printable`, so a hostile product name or error text cannot drive the
terminal; the JSON lines escape every non-ASCII and control character.

The Manager: ``--api URL`` or ``FETCHER_API_URL``; its token as ``fetcher result get`` reads
it (``FETCHER_TOKEN``, ``--token``, ``--token-file``). Exit 0, 1 on a usage or configuration
error, 2 when the Manager refuses or cannot be reached.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TextIO

import httpx

from fetcher.cli.result import ConfigError, api_token, auth_hint, token_arguments
from fetcher.cli.terminal import printable
from fetcher.client import FetcherClient, FetcherError
from fetcher.client.types import JobListItem

__all__ = ["jobs_command", "parse_moment"]

EXIT_USAGE, EXIT_UNAVAILABLE = 1, 2
DEFAULT_LIMIT = 50
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"([0-9]{1,9})([smhdw])")
_COLUMNS = ("CREATED", "ID", "STATUS", "PRODUCT", "COMPLETED", "ERROR")
_ERROR_WIDTH = 60
_SERVER_PAGE = 20


def parse_moment(text: str, now: datetime) -> str:
    """A duration (``1h``) → the RFC 3339 instant that long before ``now``; anything else is
    sent as is (the Manager checks dates and date-times)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        return text
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    moment = now.astimezone(UTC) - timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fetcher jobs list", description="List and search jobs (GET /v1/fetcher)."
    )
    parser.add_argument("--status", help="pending, processing, completed, failed (comma list)")
    parser.add_argument("--connection", metavar="ID", help="jobs that used this connection")
    parser.add_argument("--since", help="created at or after: 1h, 2d, YYYY-MM-DD, RFC 3339")
    parser.add_argument("--until", help="created at or before: 1h, 2d, YYYY-MM-DD, RFC 3339")
    parser.add_argument("--product", help="only this product's jobs (X-Product-Name)")
    parser.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, help="at most N jobs (0: all; default 50)"
    )
    parser.add_argument("--json", action="store_true", help="JSON lines even on a terminal")
    parser.add_argument("--api", help="Manager base URL (default: FETCHER_API_URL)")
    token_arguments(parser)
    return parser


def _cell(value: object) -> str:
    return "-" if value is None else printable(value)


def _row(job: JobListItem) -> tuple[str, ...]:
    metadata = job.get("metadata") or {}
    error = metadata.get("error") if job["status"] == "failed" else None
    text = _cell(error)
    if error is not None and len(text) > _ERROR_WIDTH:
        text = text[: _ERROR_WIDTH - 1] + "…"
    return (
        _cell(job["createdAt"]),
        _cell(job["id"]),
        _cell(job["status"]),
        _cell(metadata.get("source")),
        _cell(job.get("completedAt")),
        text,
    )


def _table(jobs: Iterable[JobListItem], out: TextIO) -> int:
    rows = [_row(job) for job in jobs]
    widths = [max(len(r[i]) for r in [_COLUMNS, *rows]) for i in range(len(_COLUMNS))]
    for row in [_COLUMNS, *rows]:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")
    return len(rows)


def _json_lines(jobs: Iterable[JobListItem], out: TextIO) -> int:
    count = 0
    for job in jobs:
        out.write(json.dumps(job, separators=(",", ":"), ensure_ascii=True) + "\n")
        count += 1
    return count


def _jobs(client: FetcherClient, args: argparse.Namespace, now: datetime) -> Iterable[JobListItem]:
    found = client.jobs.list(
        product=args.product,
        status=args.status,
        connection_id=args.connection,
        created_from=parse_moment(args.since, now) if args.since else None,
        created_to=parse_moment(args.until, now) if args.until else None,
        # A small --limit asks for that page size; else the server's default (20) applies.
        limit=args.limit if 0 < args.limit < _SERVER_PAGE else None,
    )
    return itertools.islice(found, args.limit) if args.limit > 0 else found


def jobs_command(
    argv: list[str],
    env: Mapping[str, str],
    stdout: TextIO | None = None,
    stderr: TextIO = sys.stderr,
    *,
    transport: httpx.BaseTransport | None = None,
    now: datetime | None = None,
) -> int:
    """``fetcher jobs list …``; returns the exit code (module docstring). ``transport`` and
    ``now`` exist for tests."""
    out = stdout or sys.stdout
    if not argv or argv[0] != "list":
        stderr.write("usage: fetcher jobs list [--status S] [--since 1h] [--json] ...\n")
        return EXIT_USAGE
    try:
        args = _parser().parse_args(argv[1:])
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        api = args.api or env.get("FETCHER_API_URL", "")
        if not api:
            raise ConfigError("set --api URL or FETCHER_API_URL (the Manager's address)")
        token = api_token(args.token, env, explicit_file=args.token_file)
        with FetcherClient(api, token=token, transport=transport) as client:
            jobs = _jobs(client, args, now or datetime.now(UTC))
            as_table = out.isatty() and not args.json
            (_table if as_table else _json_lines)(jobs, out)
    except ConfigError as exc:
        stderr.write(f"Error: {printable(exc)}\n")
        return EXIT_USAGE
    except FetcherError as exc:
        hint = auth_hint(exc, args.token or args.token_file, env)
        stderr.write(f"Error: {printable(exc)}\n{hint}")
        return EXIT_UNAVAILABLE
    return 0
