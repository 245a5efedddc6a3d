"""Issue 24: the client reads every answer as a stream and keeps at most ``max_answer_bytes``;
a larger one, a success body that is not JSON, or a feed page of the wrong shape raise
:class:`InvalidAnswerError` (the CLI turns it into one line and exit 2)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from fetcher.client import AsyncFetcherClient, FetcherClient, InvalidAnswerError

JOB = "0190a1b2-0000-7000-8000-0000000000aa"


class _Endless(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body without Content-Length that never ends; counts what was pulled."""

    def __init__(self) -> None:
        self.pulled = 0

    def __iter__(self) -> Iterator[bytes]:
        yield b'{"status":"'
        while True:
            self.pulled += 65536
            yield b"a" * 65536

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self:
            yield chunk


def _answer(stream: httpx.SyncByteStream | None = None, **kw: object) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json"}
        if stream is not None:
            return httpx.Response(200, headers=headers, stream=stream)
        return httpx.Response(200, headers=headers, **kw)  # type: ignore[arg-type]

    return httpx.MockTransport(handle)


def test_an_endless_answer_stops_just_past_the_bound() -> None:
    body = _Endless()
    client = FetcherClient("http://x", transport=_answer(body), max_answer_bytes=1_000_000)
    with client, pytest.raises(InvalidAnswerError, match="exceeds 1000000 bytes"):
        client.get_job(JOB)
    assert body.pulled < 1_000_000 + 2 * 65536


async def test_the_async_client_is_bounded_too() -> None:
    body = _Endless()
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, headers={"content-type": "application/json"}, stream=body
        )
    )
    async with AsyncFetcherClient("http://x", transport=transport, max_answer_bytes=500) as api:
        with pytest.raises(InvalidAnswerError, match="exceeds 500 bytes"):
            await api.get_job(JOB)
    assert body.pulled <= 65536


def test_a_declared_length_over_the_bound_is_refused_before_reading() -> None:
    transport = _answer(content=b"{}" * 1000)
    client = FetcherClient("http://x", transport=transport, max_answer_bytes=100)
    with client, pytest.raises(InvalidAnswerError, match="exceeds 100 bytes"):
        client.get_job(JOB)


def test_a_success_body_that_is_not_json_is_an_invalid_answer() -> None:
    client = FetcherClient("http://x", transport=_answer(content=b"{nope"))
    with client, pytest.raises(InvalidAnswerError, match="is not JSON"):
        client.get_job(JOB)


@pytest.mark.parametrize(
    "page",
    [
        b'{"items":[],"next":"1x"}',
        b'{"items":[],"next":17}',
        b'{"items":{},"next":"1"}',
        b'{"items":[1],"next":"1"}',
        b"[]",
        b'{"items":[],"next":"' + b"9" * 19 + b'"}',
    ],
)
def test_a_feed_page_of_the_wrong_shape_is_an_invalid_answer(page: bytes) -> None:
    client = FetcherClient("http://x", transport=_answer(content=page))
    with client, pytest.raises(InvalidAnswerError):
        next(client.follow_events())


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FetcherClient("http://x", max_answer_bytes=0)
