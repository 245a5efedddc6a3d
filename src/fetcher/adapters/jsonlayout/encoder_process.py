"""A second process that parses and encodes row batches (issue 12: the idle core).

One extraction runs in one Python thread: fetching, parsing JSON columns and writing §5.4
bytes, then HMAC, AES-GCM, base64 and the write all hold the same interpreter lock, so a
two-core host leaves one core idle. :class:`BatchEncoder` moves the parsing and encoding of
each batch (:func:`fetcher.adapters.jsonlayout.fastjson.encode_batch_columns`) into one child
process: the connector hands it plain column values (strings, integers, ``ExactNumber``) and gets
the batch's §5.4 bytes back, while its own thread fetches the next batch and encrypts the last.

The child is a ``concurrent.futures`` worker started through the ``spawn`` method (a fresh
interpreter, fork and exec): the host process runs threads (asyncio's executor, the HTTP
server), which a bare ``fork`` would copy in an unknown state, and ``forkserver`` would keep a
third process of about 26 MiB. Besides the child, multiprocessing runs its resource tracker
(about 12 MiB). The child is handed no key and no credential (it inherits the host's
environment, as any child process does, and reads nothing from it), logs nothing and writes
nothing to disk; the batches' plain values cross a pipe between two processes of the same
user. It exits as soon as the host process is gone, however the host ended (``SIGKILL``
included: :func:`_exit_with_host`), and the resource tracker then exits too. Like every
``spawn`` child it imports the host's ``__main__`` module under another name, so a host script
must guard its entry point (``if __name__ == "__main__"``); ``fetcher run`` and ``fetcher
demo`` do.

Nothing here is ever the only way: until the child is up (it starts in the background when a
connector first streams, :meth:`BatchEncoder.start_soon`), once it has died, or whenever it
fails on a batch, :meth:`BatchEncoder.submit` answers ``None`` or the future fails, and the
connector encodes that batch itself; the bytes are the same either way
(``tests/unit/document/test_encoder_process.py``). A batch holding a JSON value nested deeper
than the engine's ``MAX_JSON_DEPTH`` is declined by the child as well, so the host's own parse
and writer report it (``JsonDepthError``, the §4.5 query failure), exactly as with the process
off.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import select
import threading
from collections import deque
from collections.abc import AsyncGenerator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType
from typing import Self

from fetcher.adapters.batch_sizing import BATCH_TARGET_BYTES, row_bytes
from fetcher.adapters.jsonlayout.fastjson import (
    FastRowBatch,
    PreEncodedBatch,
    encode_batch_columns,
    parse_json_columns,
)

__all__ = ["BatchEncoder", "TextBatch", "encoded_batches"]

#: A batch estimated above this many bytes (rows of megabytes, one huge value) is encoded in
#: the host: through the child it would be copied twice more (its arguments and its result
#: pickled across the pipe) while it gains nothing from the second core on its own.
IN_HOST_BATCH_BYTES = 4 * BATCH_TARGET_BYTES

#: One fetched batch for the encoder: its columns, with the JSON columns still as text, and
#: those columns' indices → ``canonical_ints`` (see ``parse_json_column``).
TextBatch = tuple[list[Sequence[object]], dict[int, bool]]

_log = logging.getLogger(__name__)


def _exit_with_host(host: int) -> None:
    """The child's initializer: a daemon thread waits on a pidfd of the host process and
    ends the child the moment the host is gone. Without it a host killed by ``SIGKILL`` (the
    OOM killer, a container stop) leaves the child waiting on a queue whose write end it holds
    itself, and with it the resource tracker, for ever."""
    try:
        watched = os.pidfd_open(host)
    except ProcessLookupError:  # gone already
        os._exit(0)

    def wait() -> None:
        select.select([watched], [], [])
        os._exit(0)

    threading.Thread(target=wait, name="fetcher-host-watch", daemon=True).start()


class BatchEncoder:
    """One child process that runs :func:`encode_batch_columns` on submitted batches.

    Thread-safe. :meth:`start` blocks while the child starts (a fresh interpreter, about
    0.2-0.5 s); connectors call :meth:`start_soon`, which runs it in a thread, when they first
    stream, and batches submitted before the child is up are declined (``None``). A child that
    dies is not replaced: every later batch is declined and encodes in-process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ProcessPoolExecutor | None = None
        self._started = False
        self._settled = threading.Event()  # the child is up, or failed to start
        self._closed = False

    def start(self) -> None:
        """Start the child, once, and return when it has run a first call (or failed to
        start); a later or concurrent call waits for the same outcome."""
        with self._lock:
            if self._closed:
                return
            first = not self._started
            self._started = True
        if not first:
            self._settled.wait()
            return
        try:
            self._start_child()
        finally:
            self._settled.set()

    def _start_child(self) -> None:
        executor = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_exit_with_host,
            initargs=(os.getpid(),),
        )
        try:
            executor.submit(int).result()
        except (BrokenProcessPool, OSError):
            _log.warning("the batch encoder process did not start; batches encode in-process")
            executor.shutdown(wait=False)
            return
        self._install(executor)

    def start_soon(self) -> None:
        """Start the child in a background thread unless it was started; returns at once.
        Connectors call it when they first stream, so a host whose sources never use the
        encoder never starts a process for it."""
        if not (self._started or self._closed):
            threading.Thread(target=self.start, name="fetcher-encoder-start", daemon=True).start()

    def _install(self, executor: ProcessPoolExecutor) -> None:
        with self._lock:
            closed = self._closed  # close() may have run while the child started
            if not closed:
                self._executor = executor
        if closed:
            executor.shutdown(wait=False, cancel_futures=True)

    def submit(
        self,
        names: Sequence[str],
        columns: Sequence[Sequence[object]],
        json_columns: Sequence[int],
        json_texts: Mapping[int, bool],
    ) -> Future[bytes | None] | None:
        """The future §5.4 bytes of the batch (see :func:`encode_batch_columns`), or ``None``
        when no child is ready: the caller then encodes the batch itself."""
        executor = self._executor
        if executor is None:
            return None
        try:
            return executor.submit(encode_batch_columns, names, columns, json_columns, json_texts)
        except (BrokenProcessPool, RuntimeError):  # died, or shut down meanwhile
            self._forget(executor)
            return None

    def _forget(self, executor: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is executor:
                self._executor = None
                _log.warning("the batch encoder process stopped; batches encode in-process")
        executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the child; later batches are declined."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def encoded_batches(
    encoder: BatchEncoder,
    source: AsyncGenerator[TextBatch, None],
    layout: tuple[Sequence[str], Sequence[int]],
) -> AsyncGenerator[FastRowBatch, None]:
    """Each batch of ``source`` (a connector's fetch) with its §5.4 bytes written by the encoder
    process, which parses the JSON text columns there: while it encodes one batch, the
    connector fetches the next (one batch ahead, so at most two are held). A batch the process
    declines or fails on, or one wider than :data:`IN_HOST_BATCH_BYTES`, is parsed and encoded
    here: the same bytes.
    ``layout``: the column names and the indices of the JSON columns. Closing this generator
    cancels the batch in flight and closes ``source``."""
    names, json_columns = layout
    pending: deque[tuple[TextBatch, Future[bytes | None] | None]] = deque()
    try:
        async for batch in source:
            columns, json_texts = batch
            future = None
            if row_bytes(columns) <= IN_HOST_BATCH_BYTES:
                future = encoder.submit(names, columns, json_columns, json_texts)
            pending.append((batch, future))
            # Fetching ahead only pays while the child encodes; a batch encoded here goes
            # out before the next fetch, so a wide batch is never held beside another.
            while len(pending) > (0 if future is None else 1):
                yield await _finished(layout, *pending.popleft())
        while pending:
            yield await _finished(layout, *pending.popleft())
    finally:
        for _, future in pending:
            if future is not None:
                future.cancel()
        await source.aclose()


async def _finished(
    layout: tuple[Sequence[str], Sequence[int]],
    batch: TextBatch,
    future: Future[bytes | None] | None,
) -> FastRowBatch:
    """``batch`` with the bytes the encoder process wrote; when it declined or failed, its
    JSON texts parsed here (a value nested too deep: ``JsonDepthError`` naming its column) and
    the batch left to encode here."""
    names, json_columns = layout
    columns, json_texts = batch
    encoded = None
    if future is not None:
        try:
            encoded = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this job is cancelled; else the encoder was shut down
        except Exception:  # noqa: S110 - a dead child, or a value it could not take
            pass
    if encoded is None:
        parsed = parse_json_columns(columns, json_texts, names)
        return FastRowBatch(names, parsed, json_columns=json_columns)
    return PreEncodedBatch(
        names, columns, json_columns=json_columns, json_texts=json_texts, encoded=encoded
    )
