"""The result download of ``GET /v1/fetcher/{id}/result`` (contract §14.2).

The stored object is served exactly as stored (the §6.3 ciphertext), streamed through the
object-store port a bounded chunk at a time, so a download holds about one chunk in memory
whatever the object's size. The job is read as ``GET /v1/fetcher/{id}`` reads it (tenant,
product-restricted token: otherwise ``404 FET-1001``); then:

* not ``completed`` → ``404 FET-1100``;
* the object is gone (expired, or deleted out of band) → ``410 FET-1101``;
* no object store on this process, or the store fails → ``503 FET-1103``;
* a single byte range (RFC 9110 §14) → 206; one that starts at or past the end →
  ``416 FET-1102`` with ``Content-Range: bytes */<size>``. A malformed or multi-range header
  is ignored (the whole object, 200), as RFC 9110 allows; ``If-Range`` with another validator
  also serves the whole object.

The ETag is the job's result HMAC (strong: a completed job's object is written once, before
its completion CAS, and never rewritten).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fetcher.engine import EngineError, ErrorCategory
from fetcher.services.connections.directory import not_found
from fetcher.services.errors import ApiError
from fetcher.services.infrastructure import ObjectStore
from fetcher.services.principal import Principal
from fetcher.services.records import normalized_source
from fetcher.services.store_roles import JobStore

__all__ = [
    "HMAC_HEADER",
    "KEY_VERSION_HEADER",
    "ResultDownloads",
    "ResultObject",
    "byte_range",
]

#: §14.2 response headers: the job's ``resultHmac`` and the key version of §14.3.
HMAC_HEADER = "X-Fetcher-Result-Hmac"
KEY_VERSION_HEADER = "X-Fetcher-Key-Version"

_RANGE = re.compile(r"bytes=(?:(\d{1,19})-(\d{0,19})|-(\d{1,19}))")


@dataclass(frozen=True, slots=True)
class ResultObject:
    """A completed job's stored object, ready to stream."""

    job_id: str
    key: str
    size: int
    hmac: str
    key_version: str | None

    @property
    def etag(self) -> str:
        return f'"{self.hmac}"'


def unsatisfiable(size: int) -> ApiError:
    return ApiError(
        "FET-1102",
        f"the requested range is not within the stored object of {size} bytes",
        headers={"Content-Range": f"bytes */{size}"},
    )


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The inclusive ``(start, end)`` of a single-range ``Range`` header on an object of
    ``size`` bytes; ``None`` to serve the whole object (no, malformed or multi-range header).
    Raises ``416 FET-1102`` when the range starts at or past the end (or asks for 0 bytes)."""
    if header is None:
        return None
    match = _RANGE.fullmatch(header.strip())
    if match is None:
        return None
    first, last, suffix = match.groups()
    if suffix is not None:
        length = int(suffix)
        if length == 0:
            raise unsatisfiable(size)
        return max(0, size - length), size - 1
    start = int(first)
    if last and int(last) < start:
        return None  # an invalid range-spec: the header is ignored (RFC 9110 §14.1.1)
    if start >= size:
        raise unsatisfiable(size)
    return start, min(int(last), size - 1) if last else size - 1


@dataclass
class ResultDownloads:
    """``objects`` is ``None`` where this process has no object store (a Manager without
    ``OBJECT_STORAGE_ENDPOINT``/``OBJECT_STORAGE_BUCKET``): every download is then 503."""

    store: JobStore
    objects: ObjectStore | None

    async def locate(self, job_id: str, *, principal: Principal) -> ResultObject:
        job = await self.store.get_job(job_id, tenant=principal.tenant)
        if job is None or not principal.may_act_for(normalized_source(job.metadata_json)):
            raise not_found("job")
        if job.status != "completed" or job.result_path is None or job.result_hmac is None:
            raise ApiError("FET-1100", f"the job has no result: it is {job.status}")
        objects = self._objects()
        try:
            size = await objects.size(job.result_path)
        except EngineError as exc:
            raise _mapped(exc) from None
        return ResultObject(job.id, job.result_path, size, job.result_hmac, job.result_key_version)

    async def stream(self, found: ResultObject, start: int, end: int) -> AsyncIterator[bytes]:
        """Bytes ``start``–``end`` (inclusive) of the object. A failure after the first chunk
        can only end the response early (its status is sent); the client sees a short body."""
        async for chunk in self._objects().read_range(found.key, start, end):
            yield chunk

    async def first_chunk(
        self, found: ResultObject, start: int, end: int
    ) -> tuple[bytes, AsyncIterator[bytes]]:
        """Open the read and take its first chunk, so a failure to open still answers with an
        error status (``410``/``503``) instead of a broken 200."""
        chunks = self.stream(found, start, end)
        try:
            first = await anext(chunks, b"")
        except EngineError as exc:
            raise _mapped(exc) from None
        return first, chunks

    def _objects(self) -> ObjectStore:
        if self.objects is None:
            raise ApiError(
                "FET-1103", "result downloads are not configured: this process has no object store"
            )
        return self.objects


def _mapped(exc: EngineError) -> ApiError:
    if exc.category is ErrorCategory.NOT_FOUND:
        return ApiError("FET-1101", "the result object no longer exists")
    return ApiError("FET-1103", "the result object could not be read; try again later")
