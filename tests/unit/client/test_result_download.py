"""§14.2 from the client's side: ``ResultDownload`` streams the object, resumes a body that
ended early with ``Range``/``If-Range``, refuses a resumed answer of another object, and turns
an error answer into the client's typed error."""

from __future__ import annotations

import httpx
import pytest

from fetcher.client import NotFoundError
from fetcher.client.errors import InvalidAnswerError
from fetcher.client.results import ResultDownload

OBJECT = bytes(range(256)) * 40
JOB = "0190a1b2-0000-7000-8000-000000000001"
ETAG = '"abc"'


def _server(cut: int, resumed_etag: str = ETAG) -> tuple[httpx.MockTransport, list[dict[str, str]]]:
    seen: list[dict[str, str]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.headers))
        assert request.url.path == f"/v1/fetcher/{JOB}/result"
        wanted = request.headers.get("range")
        if wanted is None:  # the first answer: the full length announced, the body cut short
            headers = {"content-length": str(len(OBJECT)), "etag": ETAG}
            headers["x-fetcher-key-version"] = "2"
            return httpx.Response(200, headers=headers, content=OBJECT[:cut])
        start = int(wanted.removeprefix("bytes=").rstrip("-"))
        headers = {
            "etag": resumed_etag,
            "content-range": f"bytes {start}-{len(OBJECT) - 1}/{len(OBJECT)}",
        }
        return httpx.Response(206, headers=headers, content=OBJECT[start:])

    return httpx.MockTransport(handle), seen


async def _read(download: ResultDownload) -> bytes:
    return b"".join([chunk async for chunk in download.chunks()])


async def test_a_short_body_is_resumed_with_a_range() -> None:
    transport, seen = _server(cut=3000)
    download = ResultDownload("http://m", JOB, token="t0k", transport=transport)
    assert await _read(download) == OBJECT
    assert (download.resumed, download.etag, download.key_version) == (1, ETAG, "2")
    assert seen[1]["range"] == "bytes=3000-"
    assert seen[1]["if-range"] == ETAG
    assert all(h["authorization"] == "Bearer t0k" for h in seen)
    assert "t0k" not in repr(download)


async def test_a_resumed_answer_of_another_object_stops_the_download() -> None:
    transport, _ = _server(cut=3000, resumed_etag='"other"')
    with pytest.raises(InvalidAnswerError):
        await _read(ResultDownload("http://m", JOB, transport=transport))


async def test_an_error_answer_is_the_typed_error() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        body = {"code": "FET-1100", "title": "Result Not Available", "message": "pending"}
        return httpx.Response(404, json=body)

    download = ResultDownload("http://m", JOB, transport=httpx.MockTransport(handle))
    with pytest.raises(NotFoundError) as raised:
        await _read(download)
    assert raised.value.code == "FET-1100"
