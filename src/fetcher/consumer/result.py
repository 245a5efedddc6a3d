"""Open a result object: verify everything first, then stream rows (CONTRACT §5, §6.3).

The stored object is ``base64(nonce ‖ ciphertext ‖ tag)``; the plaintext is the §5.4 document
whose HMAC-SHA256 under the external key is ``result.hmac``. GCM's tag comes **last**, so no
byte of plaintext is authentic before the whole object was read. This kit therefore uses a
**verified encrypted spool**, not two passes:

* one download pass decrypts the object chunk by chunk (:class:`fetcher.crypto.ObjectDecryptor`),
  feeds the plaintext to the HMAC and writes it to an anonymous temporary file, re-encrypted
  with an ephemeral AES-256-GCM key that lives only in this process (1 MiB chunks sealed with
  :func:`fetcher.crypto.seal_chunk`, whose AAD binds each chunk's index and a final flag, so the
  spool cannot be reordered, cut or extended unnoticed);
* only when the GCM tag, the HMAC (constant-time) and the expected plaintext size all match is a
  :class:`VerifiedResult` returned; on any failure the spool is discarded and
  :class:`IntegrityError` is raised, so **no row is ever yielded** from a tampered or truncated
  object;
* rows are then parsed from the spool, one row in memory at a time.

Why not two passes (verify, then download again and parse)? The object can change between the
passes — §6.3 lets a redelivered job overwrite the key — and the second pass would then yield
unverified rows. The spool reads the object exactly once, holds no plaintext on disk
(§4.3.1's rule for the server, kept here too), and costs local disk about the size of the
plaintext. Memory stays bounded by the chunk sizes and the largest single row.

Reading rows is synchronous local work (disk, AES, JSON); async consumers with very large
results may iterate in ``asyncio.to_thread``.
"""

from __future__ import annotations

import codecs
import hmac as _hmac
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any

from fetcher.consumer.errors import IntegrityError, ResultError, ResultFormatError
from fetcher.consumer.events import JobCompleted
from fetcher.consumer.keys import ConsumerKeys
from fetcher.consumer.stores import ObjectSource
from fetcher.crypto.aead import (
    DecryptionError,
    ObjectDecryptor,
    new_ephemeral_key,
    open_chunk,
    seal_chunk,
)
from fetcher.crypto.hmac import HmacStream

__all__ = ["ResultRef", "ResultTable", "VerifiedResult", "open_result"]

SPOOL_CHUNK_SIZE = 1024 * 1024
_LENGTH_BYTES = 4


@dataclass(frozen=True, slots=True)
class ResultRef:
    """What a consumer needs to open a result: the object key, the expected HMAC, and when
    known the plaintext size and row count (§8.2 ``result``, §4.6 ``resultPath``/``resultHmac``)."""

    path: str
    hmac: str
    size_bytes: int | None = None
    row_count: int | None = None
    #: §14.3: the key version that sealed the object (the job's ``result.keyVersion``).
    key_version: str | None = None

    @classmethod
    def of(cls, source: ResultRef | JobCompleted | Mapping[str, Any]) -> ResultRef:
        """From a verified ``job.completed``, a JobResponse (``GET /v1/fetcher/{id}``), or self."""
        if isinstance(source, ResultRef):
            return source
        if isinstance(source, JobCompleted):
            r = source.result
            return cls(r.path, r.hmac, r.size_bytes, r.row_count)
        path, mac = source.get("resultPath"), source.get("resultHmac")
        if source.get("status") != "completed" or not isinstance(path, str):
            raise ResultError("the job is not completed: it has no result")
        if not isinstance(mac, str):
            raise ResultError("the job has no resultHmac")
        summary = source.get("result")  # §14.1, when the Manager records it
        if not isinstance(summary, Mapping):
            return cls(path, mac)
        size, rows, version = (summary.get(k) for k in ("plaintextBytes", "rowCount", "keyVersion"))
        return cls(
            path,
            mac,
            size if isinstance(size, int) and not isinstance(size, bool) else None,
            rows if isinstance(rows, int) and not isinstance(rows, bool) else None,
            version if isinstance(version, str) else None,
        )


class _EncryptedSpool:
    """Plaintext sealed in 1 MiB chunks under an ephemeral key, in an unlinked 0600 file."""

    def __init__(self, directory: str | None) -> None:
        self._file: IO[bytes] | None = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115
        self._key: bytes | None = new_ephemeral_key()
        self._buffer = bytearray()
        self._count = 0
        self._offset = 0
        self._sealed = False

    def _append(self, data: bytes, *, final: bool) -> None:
        if self._file is None or self._key is None:
            raise ResultError("result is closed")
        blob = seal_chunk(self._key, data, index=self._count, final=final)
        self._file.write(len(blob).to_bytes(_LENGTH_BYTES, "big") + blob)
        self._count += 1

    def write(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) > SPOOL_CHUNK_SIZE:
            self._append(bytes(self._buffer[:SPOOL_CHUNK_SIZE]), final=False)
            del self._buffer[:SPOOL_CHUNK_SIZE]

    def seal(self) -> None:
        self._append(bytes(self._buffer), final=True)
        self._buffer = bytearray()
        if self._file is not None:
            self._file.flush()
        self._sealed = True

    def chunks(self) -> Iterator[bytes]:
        """The plaintext, chunk by chunk; each chunk authenticated at its position."""
        if self._file is None or self._key is None or not self._sealed:
            raise ResultError("result is closed")
        fd, key, offset = self._file.fileno(), self._key, 0
        for index in range(self._count):
            head = os.pread(fd, _LENGTH_BYTES, offset)
            size = int.from_bytes(head, "big")
            blob = os.pread(fd, size, offset + _LENGTH_BYTES)
            if len(head) != _LENGTH_BYTES or len(blob) != size:
                raise IntegrityError("local result spool was cut short")
            offset += _LENGTH_BYTES + size
            try:
                yield open_chunk(key, blob, index=index, final=index == self._count - 1)
            except DecryptionError:
                raise IntegrityError("local result spool was modified") from None

    def close(self) -> None:
        file, self._file, self._key = self._file, None, None
        self._buffer = bytearray()
        if file is not None:
            file.close()


ProgressCallback = Callable[[int], None]


async def open_result(
    result: ResultRef | JobCompleted | Mapping[str, Any],
    source: ObjectSource,
    keys: ConsumerKeys,
    *,
    spool_dir: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> VerifiedResult:
    """Download, decrypt and verify one result object; return it ready to stream.

    ``result`` is a verified :class:`JobCompleted`, a JobResponse mapping, or a
    :class:`ResultRef`. ``keys`` must hold the storage key. ``on_progress`` receives the
    number of stored bytes read so far. Raises :class:`IntegrityError` (tag, HMAC, size),
    :class:`~fetcher.consumer.errors.ResultNotFoundError`, or :class:`ResultError`; in every
    failure case nothing of the plaintext is returned.
    """
    ref = ResultRef.of(result)
    if keys.storage is None:
        raise ResultError("opening a result needs the storage key (derive-key --purpose storage)")
    decryptor, mac = ObjectDecryptor(keys.storage), HmacStream(keys.external_hmac)
    spool = _EncryptedSpool(spool_dir)
    size = read = 0
    try:
        try:
            async for chunk in source.chunks(ref.path):
                read += len(chunk)
                plain = decryptor.update(chunk)
                mac.update(plain)
                spool.write(plain)
                size += len(plain)
                if on_progress is not None:
                    on_progress(read)
            plain = decryptor.finalize()
        except DecryptionError:
            raise IntegrityError("result object failed AES-GCM authentication") from None
        mac.update(plain)
        spool.write(plain)
        size += len(plain)
        expected = ref.hmac.encode("ascii", "replace")
        if not _hmac.compare_digest(mac.hexdigest().encode("ascii"), expected):
            raise IntegrityError("result HMAC does not match")
        if ref.size_bytes is not None and ref.size_bytes != size:
            raise IntegrityError("result size does not match the event's size_bytes")
        spool.seal()
    except BaseException:
        spool.close()
        raise
    return VerifiedResult(ref, size, spool)


@dataclass(frozen=True, slots=True)
class ResultTable:
    """One table of the document: its datasource, its key, and its rows (consume in order)."""

    datasource: str
    table: str
    rows: Iterator[dict[str, Any]]


class VerifiedResult:
    """A result whose GCM tag and HMAC verified; stream it with :meth:`tables` or :meth:`rows`.

    Close it (``with``/``async with``, or :meth:`close`) to discard the spool and its key.
    """

    def __init__(self, ref: ResultRef, size_bytes: int, spool: _EncryptedSpool) -> None:
        self.ref = ref
        self.size_bytes = size_bytes
        self._spool = spool

    @property
    def path(self) -> str:
        return self.ref.path

    def iter_bytes(self) -> Iterator[bytes]:
        """The verified plaintext (the exact §5.4 bytes), chunk by chunk."""
        return self._spool.chunks()

    def write_to(self, out: IO[bytes]) -> int:
        """Write the verified plaintext to ``out``; return the number of bytes written."""
        total = 0
        for chunk in self.iter_bytes():
            out.write(chunk)
            total += len(chunk)
        return total

    def tables(self, *, parse_float: Callable[[str], Any] = float) -> Iterator[ResultTable]:
        """Every ``(datasource, table)`` in document order, empty tables included (§5.1).

        A table's ``rows`` must be consumed before the next table is requested; rows left
        unread are skipped. ``parse_float=decimal.Decimal`` keeps JSON-column number text.
        """
        scanner = _Scanner(self.iter_bytes(), parse_float)
        return _walk(scanner)

    def rows(
        self, *, parse_float: Callable[[str], Any] = float
    ) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Every row as ``(datasource, table, row)``."""
        for table in self.tables(parse_float=parse_float):
            for row in table.rows:
                yield table.datasource, table.table, row

    def row_counts(self) -> dict[str, dict[str, int]]:
        """``{datasource: {table: rows}}``, streaming (rows are counted, not kept)."""
        counts: dict[str, dict[str, int]] = {}
        for table in self.tables():
            counts.setdefault(table.datasource, {})[table.table] = sum(1 for _ in table.rows)
        return counts

    def close(self) -> None:
        self._spool.close()

    def __enter__(self) -> VerifiedResult:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> VerifiedResult:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"VerifiedResult(path={self.path!r}, size_bytes={self.size_bytes})"


class _Scanner:
    """A pull tokenizer over the plaintext: whitespace, single characters, and whole JSON values
    (one row at a time) decoded with :meth:`json.JSONDecoder.raw_decode`."""

    _WS = " \t\r\n"

    def __init__(self, chunks: Iterator[bytes], parse_float: Callable[[str], Any]) -> None:
        self._chunks = chunks
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._json = json.JSONDecoder(parse_float=parse_float)
        self._buf = ""
        self._pos = 0
        self._eof = False

    def _fill(self, more: int) -> bool:
        """Read until ``more`` further characters are buffered; False at the end of input."""
        if self._eof:
            return False
        self._buf, self._pos = self._buf[self._pos :], 0
        target = len(self._buf) + more
        parts = [self._buf]
        size = len(self._buf)
        try:
            while size < target:
                chunk = next(self._chunks, None)
                if chunk is None:
                    parts.append(self._utf8.decode(b"", final=True))
                    self._eof = True
                    break
                text = self._utf8.decode(chunk)
                parts.append(text)
                size += len(text)
        except UnicodeDecodeError:
            raise ResultFormatError("result is not UTF-8") from None
        self._buf = "".join(parts)
        return True

    def peek(self) -> str:
        """The next non-whitespace character (not consumed), or ``""`` at the end."""
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in self._WS:
                self._pos += 1
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill(SPOOL_CHUNK_SIZE):
                return ""

    def take(self, expected: str) -> None:
        if self.peek() != expected:
            raise ResultFormatError(f"expected {expected!r} in the result document")
        self._pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = self._json.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError:
                end = -1
            if end != -1 and (end < len(self._buf) or self._eof):
                self._pos = end
                return value
            if not self._fill(max(len(self._buf) - self._pos, SPOOL_CHUNK_SIZE)):
                raise ResultFormatError("invalid JSON value in the result document")

    def key(self) -> str:
        key = self.value()
        if not isinstance(key, str):
            raise ResultFormatError("expected an object key in the result document")
        self.take(":")
        return key

    def end(self) -> None:
        if self.peek() != "":
            raise ResultFormatError("trailing data after the result document")


def _members(scanner: _Scanner) -> Iterator[str]:
    """Keys of the object that starts at the scanner; the caller consumes each value."""
    scanner.take("{")
    if scanner.peek() == "}":
        scanner.take("}")
        return
    while True:
        yield scanner.key()
        if scanner.peek() == ",":
            scanner.take(",")
            continue
        scanner.take("}")
        return


def _rows(scanner: _Scanner) -> Iterator[dict[str, Any]]:
    scanner.take("[")
    if scanner.peek() == "]":
        scanner.take("]")
        return
    while True:
        row = scanner.value()
        if not isinstance(row, dict):
            raise ResultFormatError("a row of the result document is not an object")
        yield row
        if scanner.peek() == ",":
            scanner.take(",")
            continue
        scanner.take("]")
        return


def _walk(scanner: _Scanner) -> Iterator[ResultTable]:
    for datasource in _members(scanner):
        for table in _members(scanner):
            rows = _rows(scanner)
            yield ResultTable(datasource, table, rows)
            for _ in rows:  # skip what the caller left unread
                pass
    scanner.end()
