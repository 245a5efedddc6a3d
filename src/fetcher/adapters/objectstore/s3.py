"""S3-compatible result store over aioboto3 (contract §6.3, §4.3 step 5, §2.10, §9.1).

* ``open_writer(key)`` streams the stored bytes: parts of ``part_size`` (≥ 5 MiB) are buffered and
  uploaded with a multipart upload, each in the background while the next fills (one in
  flight); an object that never fills one part is sent with a single ``PutObject``. Memory
  stays bounded to about two parts. ``Content-Type`` is
  ``application/octet-stream`` (§6.3).
* On any error or cancellation inside or at the end of the block, the multipart upload is
  aborted and the key is deleted on a best-effort basis, so no object remains (§4.3 step 5).
* Every botocore/aiohttp failure becomes ``EngineError(UNAVAILABLE, …)`` in
  :func:`map_s3_errors`; the detail never carries the credentials.
* ``check`` sends ``HeadBucket`` (§2.10).

The client is opened in :meth:`S3ObjectStore.open` (or ``async with``) and closed by
:meth:`S3ObjectStore.close`; both are safe to call twice. Nothing happens at import or
construction time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fetcher.crypto import Redactor
from fetcher.engine import EngineError, ErrorCategory
from fetcher.lifecycle import AsyncResource
from fetcher.services.infrastructure import ObjectWriter

__all__ = ["CONTENT_TYPE", "MIN_PART_SIZE", "S3ObjectStore", "map_s3_errors"]

log = logging.getLogger(__name__)

#: §6.3: the object Content-Type.
CONTENT_TYPE = "application/octet-stream"
#: S3's minimum size of every part but the last.
MIN_PART_SIZE = 5 * 1024 * 1024
DEFAULT_PART_SIZE = 8 * 1024 * 1024
#: Bytes per chunk of a streamed read (§14.2): what one download holds at a time.
READ_CHUNK = 256 * 1024
#: Upper bound of the abort/delete clean-up after a failed write.
CLEANUP_TIMEOUT_SECONDS = 15.0

STORE_FAILED = "failed to store result"
READ_FAILED = "failed to read result"
NOT_FOUND = "result object not found"
CHECK_FAILED = "object storage is not reachable"
_MISSING_CODES = frozenset({"404", "NoSuchKey", "NotFound"})


def _describe(exc: BaseException) -> str:
    """A short, credential-free text for a botocore / aiohttp exception."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error") or {}
        code = str(error.get("Code") or "")
        message = str(error.get("Message") or "")
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        parts = [p for p in (code, message) if p]
        if not parts and status:
            parts = [f"HTTP {status}"]
        if parts:
            return ": ".join(dict.fromkeys(parts))
    return str(exc) or type(exc).__name__


def _detail(exc: BaseException, secrets: Iterable[str | None]) -> str:
    """:func:`_describe` with every occurrence of each credential in ``secrets`` replaced by
    ``[redacted]`` (the §8.7 known-value step of :class:`~fetcher.crypto.Redactor`)."""
    return Redactor(secret for secret in secrets if secret).redact_known(_describe(exc))


def error_code(exc: BaseException) -> str:
    """The S3 error code of a ``ClientError`` (``""`` for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str((response.get("Error") or {}).get("Code") or "")


@contextlib.contextmanager
def map_s3_errors(message: str, *, secrets: Iterable[str | None] = ()) -> Iterator[None]:
    """The one place S3 failures are translated: ``EngineError(UNAVAILABLE, message, detail)``.

    ``detail`` is the S3 error code and message (or the transport error text), with every value
    in ``secrets`` (the access key ID and the secret key) replaced by ``[redacted]``.
    """
    from aiohttp import ClientError as HttpError
    from botocore.exceptions import (  # type: ignore[import-untyped]
        BotoCoreError,
        ClientError,
    )

    try:
        yield
    except EngineError:
        raise
    except (ClientError, BotoCoreError, HttpError, OSError, TimeoutError, ValueError) as exc:
        detail = _detail(exc, secrets)
        raise EngineError(ErrorCategory.UNAVAILABLE, message, detail=detail) from exc


class _MultipartWriter:
    """Buffers the stored bytes and uploads each full part in the background (``ObjectWriter``).

    One part uploads while the next fills, so the producer (the extraction, when the first
    datasource streams directly, §4.3.1) keeps working during the upload. At most one part is in
    flight: a full buffer waits for it, so memory stays at about two parts.
    """

    def __init__(self, store: S3ObjectStore, client: Any, key: str) -> None:
        self._store = store
        self._client = client
        self._key = key
        self._buffer = bytearray()
        self._parts: list[dict[str, Any]] = []
        self._in_flight: asyncio.Task[None] | None = None
        self._creating: asyncio.Future[str] | None = None
        self.upload_id: str | None = None

    async def write(self, chunk: bytes) -> None:
        self._buffer += chunk
        if len(self._buffer) >= self._store.part_size:
            await self._wait_in_flight()  # first, so the copy below never makes three parts
            await self._ensure_upload()
            part, self._buffer = bytes(self._buffer), bytearray()
            number = len(self._parts) + 1
            self._in_flight = asyncio.create_task(self._upload_part(number, part))

    async def _wait_in_flight(self) -> None:
        """Wait for the part in flight; its failure (``EngineError``) is raised here."""
        if self._in_flight is not None:
            await self._in_flight
            self._in_flight = None

    async def _ensure_upload(self) -> None:
        """Create the multipart upload. Shielded: a cancellation (fail-fast of another
        datasource, §4.3 step 3) must not lose the ID of an upload the server created, or
        ``discard`` could not abort it."""
        if self.upload_id is None:
            if self._creating is None:
                self._creating = asyncio.ensure_future(self._create())
            self.upload_id = await asyncio.shield(self._creating)

    async def _create(self) -> str:
        with self._store.errors(STORE_FAILED):
            created = await self._client.create_multipart_upload(
                Bucket=self._store.bucket, Key=self._key, ContentType=CONTENT_TYPE
            )
        return str(created["UploadId"])

    async def _upload_part(self, number: int, data: bytes) -> None:
        with self._store.errors(STORE_FAILED):
            result = await self._client.upload_part(
                Bucket=self._store.bucket,
                Key=self._key,
                UploadId=self.upload_id,
                PartNumber=number,
                Body=data,
            )
        self._parts.append({"ETag": result["ETag"], "PartNumber": number})

    async def finish(self) -> None:
        """Send what is buffered: one ``PutObject``, or the last part and the completion."""
        bucket = self._store.bucket
        if self.upload_id is None:
            data, self._buffer = bytes(self._buffer), bytearray()
            with self._store.errors(STORE_FAILED):
                await self._client.put_object(
                    Bucket=bucket, Key=self._key, Body=data, ContentType=CONTENT_TYPE
                )
            return
        await self._wait_in_flight()
        data, self._buffer = bytes(self._buffer), bytearray()
        if data:
            await self._upload_part(len(self._parts) + 1, data)
        with self._store.errors(STORE_FAILED):
            await self._client.complete_multipart_upload(
                Bucket=bucket,
                Key=self._key,
                UploadId=self.upload_id,
                MultipartUpload={"Parts": self._parts},
            )

    async def discard(self) -> None:
        """Stop the part in flight, abort the multipart upload and delete the key (best effort,
        bounded, never raises)."""
        self._buffer = bytearray()
        bucket = self._store.bucket
        in_flight, self._in_flight = self._in_flight, None
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT_SECONDS):
                if in_flight is not None:  # its error, if any, is the one being handled
                    in_flight.cancel()
                    await asyncio.gather(in_flight, return_exceptions=True)
                if self.upload_id is None and self._creating is not None:
                    (created,) = await asyncio.gather(self._creating, return_exceptions=True)
                    self.upload_id = created if isinstance(created, str) else None
                if self.upload_id is not None:
                    await self._client.abort_multipart_upload(
                        Bucket=bucket, Key=self._key, UploadId=self.upload_id
                    )
                await self._client.delete_object(Bucket=bucket, Key=self._key)
        except Exception as exc:  # best effort: the write already failed
            detail = _detail(exc, self._store.secrets)
            log.warning("object storage clean-up after a failed write failed: %s", detail)


class S3ObjectStore(AsyncResource):
    """``ObjectStore`` on an S3-compatible bucket (§6.3, §9.1 ``OBJECT_STORAGE_*``)."""

    def __init__(
        self,
        *,
        endpoint: str,
        bucket: str,
        region: str,
        access_key_id: str | None,
        secret_key: str | None,
        path_style: bool,
        part_size: int = DEFAULT_PART_SIZE,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        max_attempts: int = 3,
    ) -> None:
        if part_size < MIN_PART_SIZE:
            raise ValueError(f"part_size must be at least {MIN_PART_SIZE} bytes")
        self.endpoint = endpoint
        self.bucket = bucket
        self.region = region
        self.path_style = path_style
        self.part_size = part_size
        self._access_key_id = access_key_id
        self._secret_key = secret_key
        self._timeouts = (connect_timeout, read_timeout)
        self._max_attempts = max_attempts
        self._stack: AsyncExitStack | None = None
        self._client: Any = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        credentials = "static" if self._access_key_id else "default-chain"
        return (
            f"S3ObjectStore(endpoint={self.endpoint!r}, bucket={self.bucket!r}, "
            f"region={self.region!r}, path_style={self.path_style}, credentials={credentials})"
        )

    @property
    def secrets(self) -> tuple[str | None, ...]:
        return (self._secret_key, self._access_key_id)

    def errors(self, message: str) -> contextlib.AbstractContextManager[None]:
        """:func:`map_s3_errors` with this store's credentials as the values to scrub."""
        return map_s3_errors(message, secrets=self.secrets)

    async def open(self) -> None:
        """Create the aioboto3 client (idempotent)."""
        async with self._lock:
            if self._client is not None:
                return
            import aioboto3
            from botocore.config import Config  # type: ignore[import-untyped]

            config = Config(
                region_name=self.region,
                signature_version="s3v4",
                s3={"addressing_style": "path" if self.path_style else "auto"},
                connect_timeout=self._timeouts[0],
                read_timeout=self._timeouts[1],
                retries={"max_attempts": self._max_attempts, "mode": "standard"},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            )
            stack = AsyncExitStack()
            with self.errors(CHECK_FAILED):
                self._client = await stack.enter_async_context(
                    aioboto3.Session().client(
                        "s3",
                        endpoint_url=self.endpoint,
                        region_name=self.region,
                        aws_access_key_id=self._access_key_id,
                        aws_secret_access_key=self._secret_key,
                        config=config,
                    )
                )
            self._stack = stack

    async def close(self) -> None:
        """Close the client (idempotent)."""
        async with self._lock:
            stack, self._stack, self._client = self._stack, None, None
            if stack is not None:
                await stack.aclose()

    def _require_client(self) -> Any:
        if self._client is None:
            raise RuntimeError("S3ObjectStore is not open: call open() or use 'async with'")
        return self._client

    @asynccontextmanager
    async def open_writer(self, key: str) -> AsyncIterator[ObjectWriter]:
        """Stream the object at ``key``; it exists only if the block exits cleanly."""
        writer = _MultipartWriter(self, self._require_client(), key)
        finished = False
        try:
            yield writer
            await writer.finish()
            finished = True
        finally:
            if not finished:
                await asyncio.shield(asyncio.ensure_future(writer.discard()))

    async def read(self, key: str) -> bytes:
        """The stored bytes at ``key``; a missing object raises ``NOT_FOUND``."""
        client = self._require_client()
        with self.errors(READ_FAILED):
            try:
                response = await client.get_object(Bucket=self.bucket, Key=key)
            except Exception as exc:
                if error_code(exc) in _MISSING_CODES:
                    raise EngineError(ErrorCategory.NOT_FOUND, NOT_FOUND) from exc
                raise
            async with response["Body"] as body:
                data: bytes = await body.read()
        return data

    async def delete(self, key: str) -> None:
        client = self._require_client()
        with self.errors(READ_FAILED):
            await client.delete_object(Bucket=self.bucket, Key=key)

    async def exists(self, key: str) -> bool:
        client = self._require_client()
        with self.errors(READ_FAILED):
            try:
                await client.head_object(Bucket=self.bucket, Key=key)
            except Exception as exc:
                if error_code(exc) in _MISSING_CODES:
                    return False
                raise
        return True

    async def size(self, key: str) -> int:
        """§14.2: ``HeadObject``'s ``ContentLength``; a missing object raises ``NOT_FOUND``."""
        client = self._require_client()
        with self.errors(READ_FAILED):
            try:
                head = await client.head_object(Bucket=self.bucket, Key=key)
            except Exception as exc:
                if error_code(exc) in _MISSING_CODES:
                    raise EngineError(ErrorCategory.NOT_FOUND, NOT_FOUND) from exc
                raise
        return int(head["ContentLength"])

    async def read_range(self, key: str, start: int, end: int) -> AsyncIterator[bytes]:
        """§14.2: one ranged ``GetObject`` (``bytes=start-end``), its body read
        :data:`READ_CHUNK` bytes at a time."""
        client = self._require_client()
        with self.errors(READ_FAILED):
            try:
                response = await client.get_object(
                    Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end}"
                )
            except Exception as exc:
                if error_code(exc) in _MISSING_CODES:
                    raise EngineError(ErrorCategory.NOT_FOUND, NOT_FOUND) from exc
                raise
            body = response["Body"]
            try:
                while chunk := await body.read(READ_CHUNK):
                    yield bytes(chunk)
            finally:
                body.close()

    async def check(self) -> None:
        """§2.10 readiness: ``HeadBucket`` on the configured bucket."""
        client = self._require_client()
        with self.errors(CHECK_FAILED):
            await client.head_bucket(Bucket=self.bucket)
