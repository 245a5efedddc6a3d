"""``fetcher events tail``: follow job events, verify and deduplicate them, print one line each
(CONTRACT §8, §2.12) — through the consumer kit.

* By default it consumes from RabbitMQ: a queue bound to ``job.completed`` and ``job.failed``
  (or ``--type``) on the events exchange — ``--queue NAME`` for a durable queue of your own,
  otherwise an exclusive server-named one that disappears with the command. Every message is
  verified (§8.5 signature over the delivered exchange and routing key, freshness, tenant,
  schema): a rejected one is dead-lettered (``reject requeue=false``) and reported on stderr.
  A repeated ``ce-id`` is acknowledged and not printed again.
* ``--feed URL`` follows the Manager's event feed instead (``GET /v1/events`` long-polling),
  **from now**: the feed's existing pages are read without printing until one is empty, then
  only new events print. ``--from-start`` replays the whole feed first, ``--since WHEN`` the
  events created at or after WHEN (``1h``, ``2026-12-04``, an RFC 3339 date-time), ``--after
  CURSOR`` those after a cursor; each needs ``--feed`` (a usage error otherwise, exit 2).
  Against ``AUTH_MODE=jwt`` (§12) it needs a bearer token with ``fetcher:events:read``:
  ``FETCHER_TOKEN`` (preferred: out of shell history and process lists), or ``--token``; or
  a file holding it, ``--token-file`` or ``FETCHER_TOKEN_FILE``, read again before every
  request (a rotated short-lived token is picked up); ``FETCHER_API_TOKEN`` is still read.
  The token is never printed. Feed items carry no signature (§2.12), so a feed event is
  **unverified**: the tenant, the schema version and the header/body agreement are checked,
  but nothing proves the Manager (or whoever answers at URL) did not invent it. An item that
  does carry ``t``/``signature-version``/``x-message-signature`` headers is checked like an
  AMQP message (against ``--exchange``); one that fails is shown as ``bad signature``.
  Each page is read up to ``--max-page-bytes`` (default 16 MiB); a larger answer, a page
  that is not JSON or a ``next`` that is not a §2.12 cursor stop the command (exit 2).

Output: ``<ce-time> completed <jobId> rows=<n> bytes=<n> path=<key>`` or
``<ce-time> failed <jobId> error=<json text>``, followed by `` [unverified: <reason>]`` for an
event whose signature was not checked (``unsigned feed``) or did not verify (``bad
signature``), and by `` [job_id is not a UUID]`` when it is not one; ``--json`` prints one
compact JSON object per event instead, with ``"verified"`` (and ``"unverified"``, the reason)
and ``"job_id_is_uuid"``. ``--require-verified`` stops at the first unverified event, prints
nothing of it and exits 2. Every value from the server is escaped before it is written
(:mod:`fetcher.cli.terminal`: control characters, ESC, DEL and bidi overrides are shown as
``\\xNN``/``\\uNNNN``). ``--count N`` exits after N new events. Status lines go to stderr on a
terminal only. Connection settings: ``--amqp URL`` or ``FETCHER_AMQP_URL``, else ``RABBITMQ_HOST``,
``RABBITMQ_PORT_AMQP``, ``RABBITMQ_DEFAULT_USER``, ``RABBITMQ_DEFAULT_PASS``, ``RABBITMQ_VHOST``;
the exchange from ``--exchange`` or ``RABBITMQ_JOB_EVENTS_EXCHANGE`` (``fetcher.job.events``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO
from urllib.parse import quote

from fetcher.cli.moments import MOMENT_HELP, RFC3339, moment_instant, moment_text
from fetcher.cli.result import (
    ConfigError,
    api_token,
    auth_hint,
    byte_count,
    consumer_keys,
    token_arguments,
)
from fetcher.cli.terminal import ERROR_TEXT_CHARS, is_uuid, json_text, printable
from fetcher.client import AsyncFetcherClient, FetcherError, InvalidAnswerError
from fetcher.client._core import feed_page
from fetcher.consumer import (
    BadSignatureError,
    ConsumerKeys,
    EventError,
    JobCompleted,
    JobEvent,
    MemoryDeduplicator,
    event_from_feed_item,
    verify_event,
)

__all__ = ["events_command"]

DEFAULT_EXCHANGE = "fetcher.job.events"
#: The largest feed page read (§2.12 pages hold ~4 MiB of event data, plus their headers).
DEFAULT_MAX_PAGE_BYTES = 16 * 1024 * 1024
_SIGNING_HEADERS = ("t", "signature-version", "x-message-signature")
UNSIGNED, BAD_SIGNATURE = "unsigned feed", "bad signature"
#: A usage error (no ``tail``, options that do not go together): argparse's code.
EXIT_USAGE = 2
_USAGE = "usage: fetcher events tail [--json] [--feed URL] [--count N] ... (--help: options)\n"


class UnverifiedEventError(Exception):
    """``--require-verified`` met an event whose signature was not checked or failed."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fetcher events tail",
        description="Follow job events: verify and deduplicate them, print one line each. "
        "From RabbitMQ by default (a queue bound to job.completed and job.failed), or from the "
        "Manager's event feed with --feed URL. The feed is followed from now: only events "
        "that arrive after the command starts are printed, unless --from-start, --since or "
        "--after asks for older ones.",
        epilog="AMQP events are verified (signature, freshness, tenant, schema) or rejected. "
        "The --feed carries no signature: its events are printed flagged [unverified: unsigned "
        'feed] (--json: "verified": false); --require-verified refuses them (exit 2). A '
        "job_id that is not a UUID is flagged. Every server value is escaped before it is "
        "written (control, ESC, DEL, C1 and bidi characters as \\xNN/\\uNNNN).",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per event")
    parser.add_argument("--feed", metavar="URL", help="follow the Manager's event feed at URL")
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--from-start", action="store_true", help="replay the whole feed first (with --feed)"
    )
    start.add_argument(
        "--since",
        type=moment_text,
        metavar="WHEN",
        help=f"replay feed events created at or after WHEN: {MOMENT_HELP} (with --feed)",
    )
    start.add_argument("--after", metavar="CURSOR", help="feed cursor to start after (--feed)")
    token_arguments(parser)  # for --feed
    parser.add_argument("--amqp", metavar="URL", help="broker URL (default: FETCHER_AMQP_URL)")
    parser.add_argument("--exchange", help="events exchange (RABBITMQ_JOB_EVENTS_EXCHANGE)")
    parser.add_argument("--queue", help="a durable queue of your own (default: exclusive)")
    parser.add_argument("--type", choices=("completed", "failed"), help="only this status")
    parser.add_argument("--tenant", help="use this tenant's keys (multi-tenant mode)")
    parser.add_argument("--max-age", type=float, default=24 * 3600.0, help="seconds (t)")
    parser.add_argument("--count", type=int, help="exit after this many new events")
    parser.add_argument(
        "--require-verified",
        action="store_true",
        help="exit 2 at the first event whose signature is not verified (every --feed event "
        "without signing headers)",
    )
    parser.add_argument(
        "--max-page-bytes",
        type=byte_count,
        default=DEFAULT_MAX_PAGE_BYTES,
        metavar="N",
        help=f"largest feed page read, in bytes (default {DEFAULT_MAX_PAGE_BYTES}); "
        "a larger answer stops the command (exit 2)",
    )
    return parser


@dataclass
class _Printer:
    """Writes each event as one line, every server value escaped (:mod:`.terminal`).
    ``unverified`` is the reason an event's signature was not verified (None: it was)."""

    out: TextIO
    as_json: bool
    remaining: int | None

    def emit(self, event: JobEvent, routing_key: str, unverified: str | None = None) -> bool:
        """Print one event; False once ``--count`` events were printed."""
        self.out.write(self._line(event, routing_key, unverified) + "\n")
        self.out.flush()
        if self.remaining is None:
            return True
        self.remaining -= 1
        return self.remaining > 0

    def _line(self, event: JobEvent, routing_key: str, unverified: str | None) -> str:
        env = event.envelope
        if self.as_json:
            doc: dict[str, Any] = {
                "ce_id": env.id,
                "ce_time": env.time,
                "tenant": env.tenant_id,
                "routing_key": routing_key,
                "verified": unverified is None,
                "job_id_is_uuid": is_uuid(event.job_id),
                "data": json.loads(event.body),
            }
            if unverified is not None:
                doc["unverified"] = unverified
            return json_text(doc)
        if isinstance(event, JobCompleted):
            r = event.result
            line = (
                f"{printable(env.time)} completed {printable(event.job_id)} "
                f"rows={r.row_count} bytes={r.size_bytes} path={printable(r.path)}"
            )
        else:
            line = (
                f"{printable(env.time)} failed {printable(event.job_id)} "
                f"error={json_text(event.error_message)}"
            )
        if unverified is not None:
            line += f" [unverified: {unverified}]"
        if not is_uuid(event.job_id):
            line += " [job_id is not a UUID]"
        return line


def _amqp_url(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    if args.amqp or env.get("FETCHER_AMQP_URL"):
        return str(args.amqp or env["FETCHER_AMQP_URL"])
    user = quote(env.get("RABBITMQ_DEFAULT_USER", "guest"), safe="")
    password = quote(env.get("RABBITMQ_DEFAULT_PASS", "guest"), safe="")
    host = env.get("RABBITMQ_HOST", "127.0.0.1")
    port = env.get("RABBITMQ_PORT_AMQP", "5672")
    vhost = quote(env.get("RABBITMQ_VHOST", "/"), safe="")
    return f"amqp://{user}:{password}@{host}:{port}/{vhost}"


@dataclass
class _Tail:
    """One ``fetcher events tail`` run: its options, environment, keys, output and status
    stream, read by either source of events (:meth:`amqp` or :meth:`feed`)."""

    args: argparse.Namespace
    env: Mapping[str, str]
    keys: ConsumerKeys
    printer: _Printer
    status: TextIO

    async def amqp(self) -> None:
        import aio_pika

        args, env, status = self.args, self.env, self.status
        exchange_name = args.exchange or env.get("RABBITMQ_JOB_EVENTS_EXCHANGE") or DEFAULT_EXCHANGE
        dedup = MemoryDeduplicator()
        connection = await aio_pika.connect_robust(_amqp_url(args, env), timeout=10)
        async with connection:
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=32)
            exchange = await channel.declare_exchange(
                exchange_name, aio_pika.ExchangeType.TOPIC, durable=True
            )
            if args.queue:
                queue = await channel.declare_queue(args.queue, durable=True)
            else:
                queue = await channel.declare_queue("", exclusive=True, auto_delete=True)
            for status_name in (args.type,) if args.type else ("completed", "failed"):
                await queue.bind(exchange, routing_key=f"job.{status_name}")
            if status.isatty():
                status.write(f"listening on {exchange_name} (queue {printable(queue.name)})\n")
            async with queue.iterator() as messages:
                async for message in messages:
                    fresh = await _handle(
                        message,
                        keys=self.keys,
                        dedup=dedup,
                        printer=self.printer,
                        max_age=args.max_age,
                        status=status,
                    )
                    if not fresh:
                        return

    async def feed(self) -> None:
        args, status = self.args, self.status
        dedup = MemoryDeduplicator()
        token = api_token(args.token, self.env, explicit_file=args.token_file)
        client = AsyncFetcherClient(args.feed, token=token, max_answer_bytes=args.max_page_bytes)
        async with client as api:
            after, since = await self._start(api)
            if status.isatty():
                status.write(
                    f"following {printable(args.feed)}/v1/events after {printable(after)} "
                    "(unsigned feed: events are shown as unverified)\n"
                )
            async for item in api.follow_events(after=after):
                if since is not None and _created_before(item, since):
                    continue
                routing_key = item.get("routingKey")
                if args.type and routing_key != f"job.{args.type}":
                    continue
                try:
                    event, unverified = self._feed_event(item)
                except EventError as exc:
                    cursor = printable(item.get("cursor"), max_chars=40)
                    status.write(
                        f"rejected cursor {cursor}: {printable(exc, max_chars=ERROR_TEXT_CHARS)}\n"
                    )
                    continue
                if unverified is not None and args.require_verified:
                    raise UnverifiedEventError(
                        f"event at cursor {item.get('cursor')} is unverified "
                        f"({unverified}) and --require-verified is set"
                    )
                if await dedup.claim(event.ce_id) and not self.printer.emit(
                    event, str(routing_key), unverified
                ):
                    return

    async def _start(self, api: AsyncFetcherClient) -> tuple[str, datetime | None]:
        """The feed cursor to follow after, and the ``--since`` instant: ``--after`` as
        given; ``--from-start`` and ``--since`` from the first event; by default the feed's
        current end (pages read and not printed until one is empty), so only new events
        print."""
        args = self.args
        if args.after is not None:
            return str(args.after), None
        if args.from_start:
            return "0", None
        if args.since:
            return "0", moment_instant(args.since, datetime.now(UTC))
        return await _feed_end(api), None

    def _feed_event(self, item: Mapping[str, Any]) -> tuple[JobEvent, str | None]:
        """The event of one feed item and why it is unverified (None: its signing headers
        verified). An item without signing headers is unsigned (the §2.12 feed never has
        them); one whose signature fails is still shown, flagged ``bad signature``."""
        event = event_from_feed_item(item, self.keys)
        headers = item["headers"]
        if not all(name in headers for name in _SIGNING_HEADERS):
            return event, UNSIGNED
        exchange = self.args.exchange or self.env.get("RABBITMQ_JOB_EVENTS_EXCHANGE")
        try:
            verify_event(
                headers,
                event.body,
                exchange=exchange or DEFAULT_EXCHANGE,
                routing_key=str(item["routingKey"]),
                keys=self.keys,
                max_age=self.args.max_age,
            )
        except BadSignatureError:
            return event, BAD_SIGNATURE
        return event, None


async def _feed_end(api: AsyncFetcherClient) -> str:
    """The cursor of the feed's last event now: pages of 1000 without waiting until one is
    empty. A ``next`` that does not move forward is an unusable answer (it would loop)."""
    after = "0"
    while True:
        items, following = feed_page(await api.events(after=after, limit=1000, wait=0))
        if not items:
            return after
        if int(following) <= int(after):
            raise InvalidAnswerError("the event feed answered a next cursor that does not advance")
        after = following


def _created_before(item: Mapping[str, Any], since: datetime) -> bool:
    """True when the feed item's ``createdAt`` is an RFC 3339 instant before ``since``; an
    item whose time cannot be read is shown (and its values escaped) rather than hidden."""
    created = item.get("createdAt")
    if not isinstance(created, str) or RFC3339.fullmatch(created) is None:
        return False
    try:
        return datetime.fromisoformat(created.replace("z", "Z").replace("t", "T")) < since
    except ValueError:
        return False


async def _handle(
    message: Any,
    *,
    keys: ConsumerKeys,
    dedup: MemoryDeduplicator,
    printer: _Printer,
    max_age: float,
    status: TextIO,
) -> bool:
    """Verify, deduplicate, print, settle one delivery; False when ``--count`` is reached."""
    try:
        event = verify_event(
            message.headers or {},
            message.body,
            exchange=message.exchange or "",
            routing_key=message.routing_key or "",
            keys=keys,
            max_age=max_age,
        )
    except EventError as exc:
        await message.reject(requeue=False)
        status.write(
            f"rejected {type(exc).__name__}: {printable(exc, max_chars=ERROR_TEXT_CHARS)}\n"
        )
        return True
    if not await dedup.claim(event.ce_id):
        await message.ack()
        return True
    try:
        go_on = printer.emit(event, message.routing_key or "")
    except BaseException:
        await dedup.release(event.ce_id)
        raise
    await message.ack()
    return go_on


def events_command(
    argv: list[str],
    env: Mapping[str, str],
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
) -> int:
    """``fetcher events tail …``: 0 after ``--count`` events or Ctrl-C, 1 usage, 2 failure."""
    if argv[:1] in (["-h"], ["--help"]):
        stdout.write(_parser().format_help())
        return 0
    if argv[:1] != ["tail"]:
        stderr.write(_USAGE)
        return EXIT_USAGE
    args = _parse(argv[1:], stderr)
    if isinstance(args, int):
        return args
    try:
        keys = consumer_keys(env, args.tenant)
        printer = _Printer(stdout, args.json, args.count)
        tail = _Tail(args, env, keys, printer, stderr)
        asyncio.run(tail.feed() if args.feed else tail.amqp())
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # a hostile answer must end in one line, never a traceback
        return _report(exc, args.token or args.token_file, env, stderr)
    return 0


def _parse(argv: list[str], stderr: TextIO) -> argparse.Namespace | int:
    """The options, or the exit code when they are a usage error (argparse's, or a feed
    start option without ``--feed``)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if (args.from_start or args.since or args.after is not None) and not args.feed:
        stderr.write("fetcher events tail: error: --from-start, --since and --after need --feed\n")
        return EXIT_USAGE
    return args


def _report(exc: Exception, explicit: str | None, env: Mapping[str, str], stderr: TextIO) -> int:
    """One error line (every server text in it escaped and cut) and the exit code: 1 for a
    setting, 2 for everything else."""
    text = printable(exc, max_chars=ERROR_TEXT_CHARS)
    if isinstance(exc, ConfigError):
        stderr.write(f"Error: {text}\n")
        return 1
    if isinstance(exc, UnverifiedEventError):
        stderr.write(f"Error: {text}\n")
    elif isinstance(exc, FetcherError | EventError | OSError | ConnectionError):
        hint = auth_hint(exc, explicit, env)
        stderr.write(f"Error: {type(exc).__name__}: {text}\n{hint}")
    else:
        stderr.write(f"Error: unexpected {type(exc).__name__}: {text}\n")
    return 2
