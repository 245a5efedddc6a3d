"""``fetcher jobs list``: find jobs through the Manager's ``GET /v1/fetcher`` (issues 21, 33);
``fetcher jobs cancel ID``: cancel one (``POST /v1/fetcher/{id}/cancel``, contract §14.4);
``fetcher jobs retry ID``: submit a failed or canceled one again (``POST …/retry``, §14.5).

    fetcher jobs list --status failed --since 1h
    fetcher jobs list --product payments --connection pg_main --json | jq .id

Filters: ``--status`` (one or more states, comma-separated), ``--connection NAME|ID`` (a name
is resolved to its ID through ``GET /v1/management/connections``), ``--since`` and
``--until`` (a duration back from now such as ``30m``, ``1h``, ``2d``, ``1w``; a
``YYYY-MM-DD`` date; or an RFC 3339 date-time), ``--product`` (sent as ``X-Product-Name``).
``--limit N`` stops after N jobs (1..10000, default 50); ``--all`` lists every match. Pages
are followed through the cursor as the output needs them; nothing is held beyond one page.

Output: a table (created, ID, status, product, error) on a terminal, each cell cut so a line
fits the terminal's width (``COLUMNS``; 100 columns hold every column); JSON lines (one
compact, ASCII-escaped job per line, the API's item shape) when the output is piped, or with
``--json``. Every server value printed goes through :func:`fetcher.cli.terminal.printable`, so
a hostile product name or error text cannot drive the terminal.

Against a broken or hostile server: an answer that is not a job page (the SDK's
``InvalidAnswerError``), repeated pages with no items and a cursor, an answer over 64 MiB, or
no complete answer before ``--timeout`` seconds (default 60, for the whole listing: a server
that trickles bytes cannot hold the command) end in one error line and exit 2; every server
text in that line is escaped and cut to 2,000 characters.

The Manager: ``--api URL``, else ``FETCHER_API_URL``, else ``http://127.0.0.1:4006``; its
token as ``fetcher result get`` reads it (``FETCHER_TOKEN``, ``--token``, ``--token-file``).
Exit 0; 1 on a configuration error (a token file, an unknown connection name); 2 on a usage
error (argparse: a bad option value names the option) and when the Manager refuses, cannot be
reached or answers something unusable.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

import httpx

from fetcher.cli.deadline import DeadlineExceeded, deadline
from fetcher.cli.manager_api import DEFAULT_API_URL, api_url
from fetcher.cli.moments import MOMENT_HELP, RFC3339, moment_text, parse_moment
from fetcher.cli.result import ConfigError, api_token, auth_hint, token_arguments
from fetcher.cli.terminal import ERROR_TEXT_CHARS, is_uuid, printable
from fetcher.client import ApiError, FetcherClient, FetcherError, InvalidAnswerError, Job

__all__ = ["jobs_command", "parse_moment"]

EXIT_CONFIG, EXIT_USAGE, EXIT_UNAVAILABLE = 1, 2, 2
DEFAULT_LIMIT, MAX_LIMIT = 50, 10_000
DEFAULT_TIMEOUT, MAX_TIMEOUT = 60.0, 86_400.0
_SERVER_PAGE = 20
#: The most connection-list pages read to resolve a name.
_MAX_CONNECTION_PAGES = 1000
#: The API's parameter names → the options the user typed (error messages name the latter).
_OPTION_OF = {
    "createdFrom": "--since",
    "createdTo": "--until",
    "connectionId": "--connection",
    "status": "--status",
    "limit": "--limit",
    "X-Product-Name": "--product",
}


def _bounded(low: float, high: float, kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"'{printable(text, max_chars=40)}' is not a number"
            ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low:g}..{high:g}, not {value:g}")
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fetcher jobs list",
        description="List and search jobs, newest first (GET /v1/fetcher): a table on a "
        "terminal, JSON lines when piped.",
        epilog="Exit 0; 1 on a configuration error; 2 on a usage error, or when the Manager "
        "refuses, cannot be reached, answers something unusable or not within --timeout. "
        "Every server value is escaped before it is written.",
    )
    parser.add_argument(
        "--status",
        metavar="S[,S]",
        help="pending, processing, completed, failed, canceled (comma list)",
    )
    parser.add_argument(
        "--connection", metavar="NAME|ID", help="jobs that used this connection (name or ID)"
    )
    parser.add_argument(
        "--since", type=moment_text, metavar="WHEN", help=f"created at or after: {MOMENT_HELP}"
    )
    parser.add_argument(
        "--until", type=moment_text, metavar="WHEN", help=f"created at or before: {MOMENT_HELP}"
    )
    parser.add_argument("--product", metavar="P", help="only this product's jobs (X-Product-Name)")
    count = parser.add_mutually_exclusive_group()
    count.add_argument(
        "--limit",
        type=_bounded(1, MAX_LIMIT, int),
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"at most N jobs, 1..{MAX_LIMIT} (default {DEFAULT_LIMIT})",
    )
    count.add_argument("--all", action="store_true", help="every matching job")
    parser.add_argument("--json", action="store_true", help="JSON lines even on a terminal")
    _manager_arguments(parser, " for the whole listing")
    return parser


def _manager_arguments(parser: argparse.ArgumentParser, timeout_scope: str) -> None:
    """``--timeout``, ``--api`` and the token options every ``jobs`` command shares."""
    parser.add_argument(
        "--timeout",
        type=_bounded(0.001, MAX_TIMEOUT, float),
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"give up after this long{timeout_scope} (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--api",
        metavar="URL",
        help=f"Manager base URL (default: FETCHER_API_URL, else {DEFAULT_API_URL})",
    )
    token_arguments(parser)


# --- output --------------------------------------------------------------------------------

#: Fixed widths: CREATED (``2026-12-04 16:54:43Z``), ID (a UUID), STATUS, PRODUCT; ERROR takes
#: what the terminal has left, at least _MIN_ERROR.
_WIDTHS = (20, 36, 10, 12)
_HEADER = ("CREATED", "ID", "STATUS", "PRODUCT", "ERROR")
_GAP = "  "
_MIN_ERROR = 5
#: How much of an error text is escaped before the cell is cut (a row never costs more).
_ERROR_SCAN = 1000


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _created(value: str) -> str:
    """``2026-12-04T16:54:43.822Z`` → ``2026-12-04 16:54:43Z`` (the table's UTC second)."""
    if RFC3339.fullmatch(value) and value.endswith(("Z", "z")):
        return value[:10] + " " + value[11:19] + "Z"
    return printable(value)


class _Table:
    """Rows written as they arrive (nothing is buffered), each cell cut to its column."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        columns = shutil.get_terminal_size((100, 24)).columns
        fixed = sum(_WIDTHS) + len(_GAP) * len(_WIDTHS)
        self._widths = (*_WIDTHS, max(_MIN_ERROR, columns - fixed))
        self._line(_HEADER)

    def _line(self, cells: Iterable[str]) -> None:
        shown = [_cut(c, w) for c, w in zip(cells, self._widths, strict=True)]
        text = _GAP.join(c.ljust(w) for c, w in zip(shown, self._widths, strict=True))
        self._out.write(text.rstrip() + "\n")

    def add(self, job: Job) -> None:
        error = job.error
        if isinstance(error, dict):  # a structured error: its message
            error = error.get("message", error)
        self._line(
            (
                _created(job.created_at),
                printable(job.id),
                printable(job.status),
                "-" if job.product is None else printable(job.product),
                "-" if error is None else printable(error, max_chars=_ERROR_SCAN),
            )
        )


def _write(jobs: Iterator[Job], out: TextIO, as_table: bool) -> None:
    table = _Table(out) if as_table else None
    for job in jobs:
        if table is not None:
            table.add(job)
        else:
            out.write(json.dumps(job.to_dict(), separators=(",", ":"), ensure_ascii=True) + "\n")


# --- the listing ---------------------------------------------------------------------------


def _connection_id(client: FetcherClient, name: str, product: str | None) -> str:
    """``name`` when it is a UUID; else the ID of the one connection with that ``configName``
    (unique across products, §2.5), found through the connection list."""
    if is_uuid(name):
        return name
    for page in range(1, _MAX_CONNECTION_PAGES + 1):
        # The server's default page size: a deployment's MAX_PAGINATION_LIMIT may be lower
        # than any size chosen here.
        answer: Any = client.list_connections(product=product, page=page)
        items = answer.get("items") if isinstance(answer, dict) else None
        if not isinstance(items, list):
            raise InvalidAnswerError("the connection list answered a page without an items list")
        for item in items:
            if isinstance(item, dict) and item.get("configName") == name:
                found = item.get("id")
                if not is_uuid(found):
                    raise InvalidAnswerError("the connection list answered an ID that is no UUID")
                return str(found)
        total, size = answer.get("total"), answer.get("limit")
        if not items or not isinstance(total, int) or not isinstance(size, int):
            break
        if page * size >= total:
            break
    raise ConfigError(f"--connection: no connection is named '{printable(name, max_chars=100)}'")


def _jobs(client: FetcherClient, args: argparse.Namespace, now: datetime) -> Iterator[Job]:
    connection = _connection_id(client, args.connection, args.product) if args.connection else None
    limit = None if args.all else args.limit
    found = client.jobs.list(
        product=args.product,
        status=args.status,
        connection_id=connection,
        created_from=parse_moment(args.since, now) if args.since else None,
        created_to=parse_moment(args.until, now) if args.until else None,
        # A small --limit asks for that page size; else the server's default (20) applies.
        limit=limit if limit is not None and limit < _SERVER_PAGE else None,
    )
    for count, job in enumerate(found, start=1):
        yield job
        if limit is not None and count >= limit:
            return


def _error_text(exc: BaseException) -> str:
    """One escaped, cut line for ``exc``; an API error names the user's options, not the
    API's parameters (``--since``, never ``createdFrom``)."""
    text = printable(exc, max_chars=ERROR_TEXT_CHARS)
    if isinstance(exc, ApiError):
        for parameter, option in _OPTION_OF.items():
            text = re.sub(rf"\b{re.escape(parameter)}\b", option, text)
    return text


def jobs_command(  # noqa: PLR0911 - one return per documented outcome
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
    if argv[:1] in (["-h"], ["--help"]):
        out.write(_parser().format_help())
        return 0
    if argv[:1] in (["cancel"], ["retry"]):
        return _act_command(argv[0], argv[1:], env, (out, stderr), transport)
    if argv[:1] != ["list"]:
        stderr.write(_USAGE)
        return EXIT_USAGE
    try:
        args = _parser().parse_args(argv[1:])
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        token = api_token(args.token, env, explicit_file=args.token_file)
        with (
            deadline(args.timeout),
            FetcherClient(api_url(args.api, env), token=token, transport=transport) as client,
        ):
            _write(
                _jobs(client, args, now or datetime.now(UTC)), out, out.isatty() and not args.json
            )
            out.flush()
    except BrokenPipeError:  # `fetcher jobs list --all | head`: the reader has what it wanted
        return 0
    except Exception as exc:  # a hostile answer must end in one line, never a traceback
        return _report(exc, args, env, stderr)
    return 0


_ACTIONS = {
    "cancel": (
        "Cancel a pending or processing job (POST /v1/fetcher/{id}/cancel, §14.4); prints "
        "'<id> canceled'.",
        "a job that already ended: 409 FET-1104",
    ),
    "retry": (
        "Submit a failed or canceled job's request again (POST /v1/fetcher/{id}/retry, "
        "§14.5); prints '<job id> <status>': the new job, or the active identical job it was "
        "deduplicated against.",
        "a job that is not failed or canceled: 409 FET-1105",
    ),
}


def _act_parser(action: str) -> argparse.ArgumentParser:
    description, refusal = _ACTIONS[action]
    parser = argparse.ArgumentParser(
        prog=f"fetcher jobs {action}",
        description=description,
        epilog="Exit 0; 1 on a configuration error; 2 on a usage error, or when the Manager "
        f"refuses ({refusal}) or cannot be reached.",
    )
    parser.add_argument("job_id", metavar="ID", help="the job's ID (a UUID)")
    _manager_arguments(parser, "")
    return parser


def _act_command(
    action: str,
    argv: list[str],
    env: Mapping[str, str],
    streams: tuple[TextIO, TextIO],
    transport: httpx.BaseTransport | None,
) -> int:
    """``fetcher jobs cancel|retry ID``: one line with the outcome, or one error line."""
    out, stderr = streams
    try:
        args = _act_parser(action).parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if not is_uuid(args.job_id):
        stderr.write(f"Error: not a job ID: {printable(args.job_id, max_chars=100)}\n")
        return EXIT_USAGE
    try:
        token = api_token(args.token, env, explicit_file=args.token_file)
        with (
            deadline(args.timeout),
            FetcherClient(api_url(args.api, env), token=token, transport=transport) as client,
        ):
            if action == "cancel":
                job = client.cancel(args.job_id)
                line = f"{printable(job.id, max_chars=100)} {printable(job.status, max_chars=20)}"
            else:
                submission = client.retry(args.job_id)
                line = (
                    f"{printable(submission.job_id, max_chars=100)}"
                    f" {printable(submission.status, max_chars=20)}"
                )
    except Exception as exc:  # one line, never a traceback
        return _report(exc, args, env, stderr)
    out.write(f"{line}\n")
    return 0


def _report(
    exc: Exception, args: argparse.Namespace, env: Mapping[str, str], stderr: TextIO
) -> int:
    """One error line (server texts escaped and cut) and the exit code for ``exc``."""
    if isinstance(exc, ConfigError):
        stderr.write(f"Error: {printable(exc, max_chars=ERROR_TEXT_CHARS)}\n")
        return EXIT_CONFIG
    if isinstance(exc, DeadlineExceeded):
        stderr.write(f"Error: no complete answer within --timeout {args.timeout:g} s\n")
    elif isinstance(exc, FetcherError):
        hint = auth_hint(exc, args.token or args.token_file, env)
        stderr.write(f"Error: {_error_text(exc)}\n{hint}")
    else:
        stderr.write(f"Error: unexpected {type(exc).__name__}: {_error_text(exc)}\n")
    return EXIT_UNAVAILABLE


_USAGE = (
    "usage: fetcher jobs list [--status S] [--since 1h] [--connection NAME|ID] [--json] ...\n"
    "       fetcher jobs cancel ID\n"
    "       fetcher jobs retry ID\n"
)
