"""Result downloads over the API: ``GET /v1/fetcher/{id}/result`` (contract §14.2).

:class:`ResultDownload` is an object source for the consumer kit's ``open_result`` (it has
``chunks(key)``): it streams the stored ciphertext of one job from the Manager, so a consumer
needs the API and its keys, not bucket credentials. The bytes are verified by ``open_result``
as from a bucket (GCM tag, HMAC, size). A body that ends early (a dropped connection) is
resumed with ``Range: bytes=<received>-`` and ``If-Range: <ETag>`` up to ``resume_attempts``
times; an answer that is not the same object (another ETag, or a 200 instead of the 206) stops
the download. One chunk at a time is held (httpx's stream), never the object.

After the first answer, ``etag``, ``hmac`` and ``key_version`` hold its headers
(``X-Fetcher-Result-Hmac``, ``X-Fetcher-Key-Version``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

from fetcher.client._core import checked_token
from fetcher.client.errors import InvalidAnswerError, TransportError, error_from_response

__all__ = ["HMAC_HEADER", "KEY_VERSION_HEADER", "RESULTS_READ", "ResultDownload"]

RESULTS_READ = "fetcher:results:read"
HMAC_HEADER = "X-Fetcher-Result-Hmac"
KEY_VERSION_HEADER = "X-Fetcher-Key-Version"
_ERROR_BODY_LIMIT = 64 * 1024
TokenSource = str | Callable[[], str | Awaitable[str]]


class ResultDownload:
    """The stored object of job ``job_id`` at the Manager ``base_url`` (token: a bearer
    token with ``fetcher:results:read``, or a function returning one)."""

    def __init__(
        self,
        base_url: str,
        job_id: str,
        *,
        token: TokenSource | None = None,
        resume_attempts: int = 3,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.job_id = job_id
        self.resume_attempts = resume_attempts
        self.etag: str | None = None
        self.hmac: str | None = None
        self.key_version: str | None = None
        self.resumed = 0
        self._token = token
        self._timeout = timeout
        self._transport = transport

    def __repr__(self) -> str:
        auth = ", token=<redacted>" if self._token is not None else ""
        return f"ResultDownload({self.base_url!r}, {self.job_id!r}{auth})"

    async def _headers(self, received: int) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self._token is not None:
            value = self._token if isinstance(self._token, str) else self._token()
            if not isinstance(value, str):
                value = await value
            headers["Authorization"] = f"Bearer {checked_token(value)}"
        if received:
            headers["Range"] = f"bytes={received}-"
            headers["If-Range"] = self.etag or ""
        return headers

    async def chunks(self, key: str = "") -> AsyncIterator[bytes]:
        """The object's stored bytes (``key`` is ignored: the job names the object)."""
        url = f"{self.base_url}/v1/fetcher/{self.job_id}/result"
        received, total = 0, None
        async with httpx.AsyncClient(timeout=self._timeout, transport=self._transport) as http:
            for attempt in range(self.resume_attempts + 1):
                try:
                    async with http.stream(
                        "GET", url, headers=await self._headers(received)
                    ) as response:
                        total = await self._check(response, received, total)
                        async for chunk in response.aiter_bytes():
                            received += len(chunk)
                            yield chunk
                except (httpx.TransportError, httpx.RemoteProtocolError) as exc:
                    if attempt == self.resume_attempts:
                        raise TransportError(
                            f"{type(exc).__name__}: download interrupted"
                        ) from None
                if total is not None and received >= total:
                    return
                self.resumed += 1
        raise TransportError(f"download ended at {received} of {total} bytes")

    async def _check(self, response: httpx.Response, received: int, total: int | None) -> int:
        """The object's size from the first answer; a resumed answer must be the 206 of the
        same object (ETag) starting at ``received``."""
        if response.status_code >= 400:
            body = await _bounded(response)
            try:
                document = json.loads(body)
            except ValueError:
                document = None
            raise error_from_response(response.status_code, document, dict(response.headers))
        if received == 0:
            self.etag = response.headers.get("etag")
            self.hmac = response.headers.get(HMAC_HEADER)
            self.key_version = response.headers.get(KEY_VERSION_HEADER)
            length = response.headers.get("content-length")
            if response.status_code != 200 or length is None or not length.isdigit():
                raise InvalidAnswerError("the download answer has no Content-Length")
            return int(length)
        expected = f"bytes {received}-"
        if (
            response.status_code != 206
            or response.headers.get("etag") != self.etag
            or not response.headers.get("content-range", "").startswith(expected)
        ):
            raise InvalidAnswerError("the resumed download is not the same object")
        if total is None:  # a resume follows a first answer, which set it
            raise InvalidAnswerError("the download answer has no Content-Length")
        return total


async def _bounded(response: httpx.Response) -> bytes:
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) > _ERROR_BODY_LIMIT:
            break
    return bytes(data[:_ERROR_BODY_LIMIT])
