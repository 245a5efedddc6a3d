"""``fetcher result get <jobId|objectKey> [-o FILE]``: download a result object, verify its GCM
tag and HMAC, decrypt it and write the §5.4 JSON (CONTRACT §6.3) — through the consumer kit.

Exit codes: 0 written; 1 configuration error; 2 a usage error (a bad option, no ``get``), or
the job, the object or a service is not available, or answered something unusable (over a
read limit, not the expected JSON);
3 integrity failure (tampered or truncated object, wrong key, HMAC or size mismatch).

**Nothing is written unless the HMAC verifies**: the whole object is read, its AES-GCM tag,
its HMAC-SHA256 (under the external key, against the job's ``resultHmac`` or ``--hmac``) and
its size are checked, and only then is one byte written — to stdout, or to ``-o FILE``
through a temporary file renamed into place. What this does *not* prove: that the
``resultHmac`` a Manager answered belongs to the job you asked for (a Manager that holds the
keys can vouch for any object it wrote); give ``--hmac`` from a verified ``job.completed``
event to pin it.

Read limits: the job answer (``GET /v1/fetcher/{id}``) is read up to ``--max-answer-bytes``
(default 8 MiB), the stored object up to ``--max-object-bytes`` (default 357913980, the
largest object a Worker writes: the 256 MiB plaintext ceiling, encrypted and base64-encoded);
the object is streamed through an encrypted spool on disk, not memory. Going over a limit
stops the read (exit 2). On a terminal, the document's control, DEL, C1 and bidi characters
are written as JSON ``\\uNNNN`` escapes (the same JSON value; a pipe or ``-o`` gets the exact
bytes), and every server text in a message is escaped (:mod:`fetcher.cli.terminal`).
Progress (bytes, then rows) goes to stderr on a terminal only.

Configuration (the same variable names as the server where they exist):

* keys: ``FETCHER_EXTERNAL_KEY`` and ``FETCHER_STORAGE_KEY`` (the hex or whole lines that
  ``fetcher derive-key [--purpose storage]`` prints), else ``APP_ENC_KEY``; ``--tenant`` selects
  per-tenant keys (§12.5);
* objects: ``OBJECT_STORAGE_BUCKET`` with ``OBJECT_STORAGE_ENDPOINT``,
  ``OBJECT_STORAGE_ACCESS_KEY_ID``, ``OBJECT_STORAGE_SECRET_KEY``, ``OBJECT_STORAGE_REGION``,
  ``OBJECT_STORAGE_USE_PATH_STYLE``; without a bucket, the folder ``OBJECT_STORAGE_LOCAL_DIR``;
* a job ID is looked up at ``--api URL``, else ``FETCHER_API_URL``, else
  ``http://127.0.0.1:4006`` (a local process's default address), and its object is downloaded
  from the Manager's ``GET /v1/fetcher/{id}/result`` (§14.2; resumed with a byte range if the
  connection drops), or from the bucket with ``--from-bucket``; an object key is always read
  from the bucket and needs ``--hmac`` (the job's ``resultHmac``);
* key versions (§14.3): the job's ``result.keyVersion`` selects the master key of that version
  from ``APP_ENC_KEY``/``APP_ENC_KEY_VERSION`` or ``APP_ENC_KEY_PREVIOUS``; derived keys
  (``FETCHER_*_KEY``) must be that version's (``fetcher derive-key --version``);
* a Manager with ``AUTH_MODE=jwt`` (§12) needs a bearer token with ``fetcher:jobs:read`` (and
  ``fetcher:results:read`` for the download route):
  ``FETCHER_TOKEN`` (preferred: it stays out of shell history and process lists), or
  ``--token``; or a file holding it, ``--token-file`` or ``FETCHER_TOKEN_FILE``;
  ``FETCHER_API_TOKEN`` is still read. The token is never printed.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import os
import stat
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TextIO

from fetcher.cli.key_versions import master_key_text
from fetcher.cli.manager_api import DEFAULT_API_URL, api_url
from fetcher.cli.terminal import ERROR_TEXT_CHARS, json_document_text, printable
from fetcher.client import AuthenticationError, FetcherClient, FetcherError
from fetcher.client._core import checked_token
from fetcher.client.results import ResultDownload
from fetcher.consumer import (
    ConsumerKeys,
    IntegrityError,
    LocalFolderSource,
    ObjectSource,
    ResultError,
    ResultNotFoundError,
    ResultRef,
    S3Source,
    VerifiedResult,
    open_result,
)
from fetcher.crypto import MasterKeyError

__all__ = [
    "ConfigError",
    "TokenFile",
    "TokenSource",
    "api_token",
    "auth_hint",
    "byte_count",
    "consumer_keys",
    "result_command",
    "token_arguments",
]

EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_INTEGRITY = 1, 2, 3
#: No subcommand, or an unknown one: a usage error, argparse's code.
EXIT_BAD_COMMAND = 2
_USAGE = "usage: fetcher result get <jobId|objectKey> [-o FILE] [--hmac HEX] (--help: options)\n"
#: The largest job answer read: its metadata came in a request body of at most 1 MiB (§2.1),
#: which JSON escaping can at most sextuple.
DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024
#: The largest stored object a Worker writes: base64(12-byte nonce ‖ ciphertext ‖ 16-byte tag)
#: of the 256 MiB plaintext ceiling (§3.5 ``maxResultBytes``).
DEFAULT_MAX_OBJECT_BYTES = 4 * -(-(256 * 1024 * 1024 + 12 + 16) // 3)


class ConfigError(Exception):
    """A missing or unusable setting; the message says which."""


def consumer_keys(
    env: Mapping[str, str], tenant: str | None, version: str | None = None
) -> ConsumerKeys:
    """Keys from ``FETCHER_EXTERNAL_KEY``/``FETCHER_STORAGE_KEY``, else ``APP_ENC_KEY``; with
    a key ``version`` (§14.3), the master key of that version (``APP_ENC_KEY`` or an
    ``APP_ENC_KEY_PREVIOUS`` entry). Derived hex keys are one version's: the caller's."""
    external = env.get("FETCHER_EXTERNAL_KEY", "").strip()
    storage = env.get("FETCHER_STORAGE_KEY", "").strip() or None
    try:
        if external:
            return ConsumerKeys.from_hex(external=external, storage=storage, tenant=tenant)
        if version is not None and env.get("APP_ENC_KEY", "").strip():
            master = master_key_text(env, version)
            if master is None:
                raise ConfigError(
                    f"the result was sealed with key version {version}: set "
                    f"APP_ENC_KEY_PREVIOUS={version}:<key> (or that version's derived keys)"
                )
            return ConsumerKeys.from_master(master, tenant=tenant)
        if env.get("APP_ENC_KEY", "").strip():
            return ConsumerKeys.from_master(env["APP_ENC_KEY"], tenant=tenant)
    except MasterKeyError as exc:
        raise ConfigError(f"APP_ENC_KEY: {exc.reason}") from None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    raise ConfigError(
        "set FETCHER_EXTERNAL_KEY and FETCHER_STORAGE_KEY (fetcher derive-key output), "
        "or APP_ENC_KEY"
    )


#: What a token file may hold: the §12.2 limit is 8 KiB, with room for a newline or padding.
TOKEN_FILE_MAX_BYTES = 16 * 1024
TokenSource = str | Callable[[], str]


def api_token(
    explicit: str | None, env: Mapping[str, str], *, explicit_file: str | None = None
) -> TokenSource | None:
    """The bearer token for the Manager API (§12.1), from the first that is set of ``--token``,
    ``--token-file``, ``FETCHER_TOKEN``, ``FETCHER_TOKEN_FILE`` and the older
    ``FETCHER_API_TOKEN``; surrounding whitespace dropped; None when none is set. A token file
    is read now (a missing or unusable file fails at the start) and again before every request,
    so a rotated short-lived token (a mounted service-account token) is picked up by a long
    ``events tail``. A value or file that holds no bearer credential is a ConfigError that
    does not show it."""
    for value, is_file in (
        (explicit, False),
        (explicit_file, True),
        (env.get("FETCHER_TOKEN"), False),
        (env.get("FETCHER_TOKEN_FILE"), True),
        (env.get("FETCHER_API_TOKEN"), False),
    ):
        if not value or not value.strip():
            continue
        if is_file:
            token_file = TokenFile(Path(value))
            token_file()
            return token_file
        try:
            return checked_token(value.strip())
        except ValueError:
            raise ConfigError("FETCHER_TOKEN (or --token) is not a bearer token") from None
    return None


@dataclass(frozen=True, slots=True)
class TokenFile:
    """A file holding one bearer token, read again on every call: a regular file (a FIFO or a
    device is refused, so a read cannot block or run on), at most
    :data:`TOKEN_FILE_MAX_BYTES`. Errors name the path, never the content."""

    path: Path

    def __call__(self) -> str:
        try:
            data = self._read()
        except OSError as exc:
            raise ConfigError(f"cannot read the token file {self.path}: {exc.strerror}") from None
        if len(data) > TOKEN_FILE_MAX_BYTES:
            raise ConfigError(f"the token file {self.path} exceeds {TOKEN_FILE_MAX_BYTES} bytes")
        try:
            return checked_token(data.decode("utf-8").strip())
        except (UnicodeDecodeError, ValueError):
            raise ConfigError(f"the token file {self.path} holds no bearer token") from None

    def _read(self) -> bytes:
        """Up to one byte more than the limit, from a regular file only."""
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ConfigError(f"the token file {self.path} is not a regular file")
            data = b""
            while len(data) <= TOKEN_FILE_MAX_BYTES:
                chunk = os.read(fd, TOKEN_FILE_MAX_BYTES + 1 - len(data))
                if not chunk:
                    break
                data += chunk
            return data
        finally:
            os.close(fd)


def auth_hint(exc: BaseException, explicit: str | None, env: Mapping[str, str]) -> str:
    """A line saying what to do about a 401 (empty for any other error). It names the
    variable, never the token. ``explicit``: the ``--token`` or ``--token-file`` given."""
    if not isinstance(exc, AuthenticationError):
        return ""
    if not (explicit or any(env.get(name) for name in _TOKEN_VARIABLES)):
        return "hint: the Manager requires a bearer token: set FETCHER_TOKEN (or --token)\n"
    return "hint: the Manager refused the token (expired, or another issuer or audience?)\n"


_TOKEN_VARIABLES = ("FETCHER_TOKEN", "FETCHER_TOKEN_FILE", "FETCHER_API_TOKEN")


def object_source(env: Mapping[str, str]) -> ObjectSource | S3Source:
    bucket = env.get("OBJECT_STORAGE_BUCKET", "").strip()
    if not bucket:
        return LocalFolderSource(env.get("OBJECT_STORAGE_LOCAL_DIR", "./fetcher-data/objects"))
    return S3Source(
        bucket,
        endpoint_url=env.get("OBJECT_STORAGE_ENDPOINT") or None,
        access_key_id=env.get("OBJECT_STORAGE_ACCESS_KEY_ID") or None,
        secret_access_key=env.get("OBJECT_STORAGE_SECRET_KEY") or None,
        region=env.get("OBJECT_STORAGE_REGION") or "us-east-1",
        path_style=env.get("OBJECT_STORAGE_USE_PATH_STYLE", "").lower() in ("1", "true", "yes"),
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fetcher result get",
        description="Download, verify and decrypt a job's result.",
        epilog="Verified before one byte is written (stdout or -o FILE): the AES-GCM tag, the "
        "HMAC-SHA256 against the job's resultHmac (or --hmac) and the size; nothing is written "
        "unless the HMAC verifies. Not verified: that a Manager's resultHmac belongs to the job "
        "asked for (pin it with --hmac from a verified event). Every server text shown is "
        "escaped. Exit 0 written, 1 configuration, 2 usage error, unavailable or over a read "
        "limit, 3 integrity.",
    )
    parser.add_argument("target", help="a job ID (looked up via the API) or an object key")
    parser.add_argument("-o", "--output", help="write the JSON to FILE (default: stdout)")
    parser.add_argument("--hmac", help="expected result HMAC (required with an object key)")
    parser.add_argument("--size", type=int, help="expected plaintext size in bytes")
    parser.add_argument(
        "--api", help=f"Manager base URL (default: FETCHER_API_URL, else {DEFAULT_API_URL})"
    )
    parser.add_argument("--tenant", help="use this tenant's keys (multi-tenant mode)")
    parser.add_argument(
        "--from-bucket",
        action="store_true",
        help="read a job's object from the bucket (OBJECT_STORAGE_*) instead of the "
        "Manager's download route GET /v1/fetcher/{id}/result",
    )
    parser.add_argument(
        "--max-answer-bytes",
        type=byte_count,
        default=DEFAULT_MAX_ANSWER_BYTES,
        metavar="N",
        help=f"largest job answer read from --api (default {DEFAULT_MAX_ANSWER_BYTES})",
    )
    parser.add_argument(
        "--max-object-bytes",
        type=byte_count,
        default=DEFAULT_MAX_OBJECT_BYTES,
        metavar="N",
        help=f"largest stored object read (default {DEFAULT_MAX_OBJECT_BYTES}); "
        "nothing is written unless the object's HMAC verifies",
    )
    token_arguments(parser)
    return parser


def byte_count(text: str) -> int:
    """An argparse type: a size limit in bytes, a positive integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of bytes: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("a byte limit must be at least 1")
    return value


def token_arguments(parser: argparse.ArgumentParser) -> None:
    """``--token`` and ``--token-file`` (see :func:`api_token`)."""
    parser.add_argument(
        "--token", help="bearer token for the API (prefer FETCHER_TOKEN: no shell history)"
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="a file holding the bearer token, read again before every request "
        "(default: FETCHER_TOKEN_FILE)",
    )


def _is_job_id(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return "/" not in text


def _reference(
    args: argparse.Namespace, env: Mapping[str, str]
) -> tuple[ResultRef, ResultDownload | None]:
    """The result to open, and the download route to read it from (``None``: the bucket)."""
    if not _is_job_id(args.target):
        if not args.hmac:
            raise ConfigError("an object key needs --hmac (the job's resultHmac)")
        return ResultRef(args.target, args.hmac, size_bytes=args.size), None
    api = api_url(args.api, env)
    token = api_token(args.token, env, explicit_file=args.token_file)
    with FetcherClient(api, token=token, max_answer_bytes=args.max_answer_bytes) as client:
        job = client.get_job(args.target)
    if job.status != "completed":  # the message is escaped where it is written
        raise ResultNotFoundError(f"job {args.target} is {job.status}: it has no result")
    ref = ResultRef.of(job)
    if args.hmac:  # pinned from a verified event: the Manager's answer is not trusted for it
        ref = ResultRef(ref.path, args.hmac, args.size, ref.row_count, ref.key_version)
    return ref, None if args.from_bucket else ResultDownload(api, args.target, token=token)


@dataclass(frozen=True, slots=True)
class _BoundedSource:
    """An object source that stops a stored object at ``limit`` bytes (ResultError)."""

    source: ObjectSource | S3Source | ResultDownload
    limit: int

    async def chunks(self, key: str) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.source.chunks(key):
            read += len(chunk)
            if read > self.limit:
                raise ResultError(
                    f"the stored object exceeds {self.limit} bytes (--max-object-bytes)"
                )
            yield chunk


class _Progress:
    """Bytes read, rewritten in place on a terminal; silent otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.enabled = stream.isatty()

    def bytes_read(self, count: int) -> None:
        if self.enabled:
            self._stream.write(f"\rdownloaded {count / 1048576:.1f} MiB")
            self._stream.flush()

    def done(self, result: VerifiedResult) -> None:
        if not self.enabled:
            return
        counts = result.row_counts()
        rows = sum(n for tables in counts.values() for n in tables.values())
        tables = sum(len(t) for t in counts.values())
        self._stream.write(
            f"\rverified {result.size_bytes} bytes: {rows} rows in {tables} tables\n"
        )


async def _fetch(
    target: tuple[ResultRef, ResultDownload | None],
    keys: ConsumerKeys,
    env: Mapping[str, str],
    progress: _Progress,
    limit: int,
) -> VerifiedResult:
    ref, route = target
    source = object_source(env) if route is None else route
    bounded = _BoundedSource(source, limit)
    if isinstance(source, S3Source):
        async with source:
            return await open_result(ref, bounded, keys, on_progress=progress.bytes_read)
    return await open_result(ref, bounded, keys, on_progress=progress.bytes_read)


def _write_to_terminal(result: VerifiedResult, stdout: IO[bytes]) -> None:
    """The verified document with every character a terminal acts on as a JSON escape."""
    decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")
    for chunk in result.iter_bytes():
        stdout.write(json_document_text(decoder.decode(chunk)).encode("utf-8"))
    stdout.write(json_document_text(decoder.decode(b"", final=True)).encode("utf-8"))


def _write(result: VerifiedResult, output: str | None, stdout: IO[bytes]) -> None:
    if output is None:
        if stdout.isatty():
            _write_to_terminal(result, stdout)
        else:
            result.write_to(stdout)
        stdout.flush()
        return
    target = Path(output)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - renamed into place below
        dir=target.parent or ".", prefix=f".{target.name}.", delete=False
    )
    try:
        with handle:
            result.write_to(handle)
        os.replace(handle.name, target)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


def result_command(
    argv: list[str],
    env: Mapping[str, str],
    stdout: IO[bytes] | None = None,
    stderr: TextIO = sys.stderr,
    stdout_text: TextIO | None = None,
) -> int:
    """``fetcher result get …``; returns the exit code (module docstring). ``--help`` goes to
    ``stdout_text`` (default ``sys.stdout``)."""
    if argv[:1] in (["-h"], ["--help"]):
        (stdout_text or sys.stdout).write(_parser().format_help())
        return 0
    if argv[:1] != ["get"]:
        stderr.write(_USAGE)
        return EXIT_BAD_COMMAND
    try:
        args = _parser().parse_args(argv[1:])
    except SystemExit as exc:
        return int(exc.code or 0)
    progress = _Progress(stderr)
    try:
        target = _reference(args, env)
        keys = consumer_keys(env, args.tenant, target[0].key_version)
        fetched = _fetch(target, keys, env, progress, args.max_object_bytes)
        with asyncio.run(fetched) as result:
            _write(result, args.output, stdout or sys.stdout.buffer)
            progress.done(result)
    except Exception as exc:  # a hostile answer must end in one line, never a traceback
        return _report(exc, args.token or args.token_file, env, stderr)
    return 0


def _report(exc: Exception, explicit: str | None, env: Mapping[str, str], stderr: TextIO) -> int:
    """One error line (every server text in it escaped and cut) and the exit code for ``exc``."""
    text = printable(exc, max_chars=ERROR_TEXT_CHARS)
    if isinstance(exc, ConfigError):
        stderr.write(f"Error: {text}\n")
        return EXIT_USAGE
    if isinstance(exc, IntegrityError):
        stderr.write(f"\nintegrity check failed: {text}; nothing was written\n")
        return EXIT_INTEGRITY
    if isinstance(exc, ResultError | FetcherError | OSError):
        stderr.write(f"\nError: {text}\n{auth_hint(exc, explicit, env)}")
    else:
        stderr.write(f"\nError: unexpected {type(exc).__name__}: {text}\n")
    return EXIT_UNAVAILABLE
