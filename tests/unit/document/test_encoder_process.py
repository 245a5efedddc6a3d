"""The batch encoder process (``fetcher.adapters.jsonlayout.encoder_process``, issue 12): a batch
encoded in the child must give exactly the bytes the connector's own path writes, JSON text columns
parsed there included; its rows, read in the host, are the parsed values; and whenever the
child is not there (not started, closed, killed) or declines a batch, the connector's batch
is encoded in-process with the same bytes. A real child process, started once per module."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fetcher.adapters.jsonlayout.encoder_process import BatchEncoder, TextBatch, _finished
from fetcher.adapters.jsonlayout.fastjson import FastRowBatch, PreEncodedBatch, parse_json_columns
from fetcher.engine.errors import MAX_JSON_DEPTH, JsonDepthError
from fetcher.engine.values import ExactNumber
from tests.processes import command_line, descendants
from tests.unit.document.test_batches import _reference, _written
from tests.unit.document.test_fastjson import _NUMBER_TEXTS, _clean_text, _json_texts

_NAMES = ("doc", "id", "note", "amount")
#: index → canonical_ints, as the PostgreSQL connector passes them (jsonb: True, json: False)
_JSONB = {0: True}
_JSON = {0: False}


@pytest.fixture(scope="module")
def encoder() -> Iterator[BatchEncoder]:
    with BatchEncoder() as started:
        started.start()
        yield started


def _columns(docs: Sequence[str | None], notes: Sequence[str]) -> list[Sequence[object]]:
    count = len(docs)
    return [
        list(docs),
        list(range(count)),
        list(notes),
        [ExactNumber(f"{index}.50") for index in range(count)],
    ]


def _expected(columns: list[Sequence[object]], texts: dict[int, bool]) -> FastRowBatch:
    """The batch the connector builds without the child: JSON columns parsed in-process."""
    return FastRowBatch(_NAMES, parse_json_columns(columns, texts), json_columns=(0,))


async def _finish_async(
    columns: list[Sequence[object]], texts: dict[int, bool], future: Future[bytes | None] | None
) -> FastRowBatch:
    """What the connector yields for one batch (``encoded_batches``' last step)."""
    batch: TextBatch = (columns, texts)
    return await _finished((_NAMES, (0,)), batch, future)


def _finish(columns: list[Sequence[object]], future: Future[bytes | None] | None) -> FastRowBatch:
    return asyncio.run(_finish_async(columns, _JSONB, future))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    docs=st.lists(
        st.none() | _json_texts(_clean_text, _NUMBER_TEXTS, _clean_text), min_size=1, max_size=5
    ),
    canonical=st.booleans(),
    data=st.data(),
)
def test_child_bytes_equal_the_connectors_own(
    encoder: BatchEncoder, docs: list[str | None], canonical: bool, data: st.DataObject
) -> None:
    texts = {0: canonical}
    notes = data.draw(st.lists(_clean_text, min_size=len(docs), max_size=len(docs)))
    columns = _columns(docs, notes)
    future = encoder.submit(_NAMES, columns, (0,), texts)
    assert future is not None
    declined = future.result(timeout=30) is None  # integers beyond 64 bits, for one
    batch = asyncio.run(_finish_async(columns, texts, future))
    assert isinstance(batch, PreEncodedBatch) is not declined
    expected = _expected(columns, texts)
    assert _written([batch]) == _written([expected]) == _reference([expected])
    assert list(batch) == list(expected)


def test_json_text_is_parsed_only_when_the_rows_are_read(encoder: BatchEncoder) -> None:
    columns = _columns(['{"a": 1.50, "b": [-0, 2e3]}', None], ["x", "y"])
    batch = _finish(columns, encoder.submit(_NAMES, columns, (0,), _JSONB))
    assert isinstance(batch, PreEncodedBatch)
    assert batch._columns[0] == columns[0]  # still the text: the writer needs only the bytes
    rows = list(batch)
    assert rows == list(_expected(columns, _JSONB))
    assert rows[0]["doc"] == {"a": ExactNumber("1.50"), "b": [0, ExactNumber("2e3")]}
    assert batch[1]["doc"] is None
    assert _written([batch]) == _reference([_expected(columns, _JSONB)])


def test_json_keeps_its_number_text_through_the_child(encoder: BatchEncoder) -> None:
    columns = _columns(['{"x": 1.0e2, "y": [1.10], "z": -0}'], ["n"])
    batch = _finish(columns, encoder.submit(_NAMES, columns, (0,), _JSON))
    written = _written([batch])
    assert b'"x": 1.0e2' in written
    assert b'"z": -0' in written
    assert written == _reference([_expected(columns, _JSON)])


def test_a_batch_the_child_declines_is_encoded_in_process(encoder: BatchEncoder) -> None:
    columns = _columns(['"\\ud800"', '{"k": "\\udfff"}'], ["\ud83d", "ok"])  # lone surrogates
    future = encoder.submit(_NAMES, columns, (0,), _JSONB)
    assert future is not None
    assert future.result(timeout=30) is None  # orjson refuses a lone surrogate
    batch = _finish(columns, future)
    assert not isinstance(batch, PreEncodedBatch)
    assert _written([batch]) == _reference([_expected(columns, _JSONB)])


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 3000])
def test_a_value_nested_too_deep_is_declined_by_the_child_and_reported_here(
    encoder: BatchEncoder, depth: int
) -> None:
    """Issue 12 (hardening): the child declines the batch (it neither fails nor dies), and the
    host's own parse or writer refuses the value with ``JsonDepthError`` naming its column, as
    with the encoder process off."""
    columns = _columns(["[" * depth + "1" + "]" * depth, "[1]"], ["x", "y"])
    future = encoder.submit(_NAMES, columns, (0,), _JSONB)
    assert future is not None
    assert future.result(timeout=30) is None
    with pytest.raises(JsonDepthError) as caught:
        _written([_finish(columns, future)])
    assert caught.value.column == "doc"
    again = encoder.submit(_NAMES, columns, (0,), _JSONB)  # the same child takes the next one
    assert again is not None
    assert again.result(timeout=30) is None


def test_a_value_at_the_bound_is_encoded_by_the_child(encoder: BatchEncoder) -> None:
    depth = MAX_JSON_DEPTH
    columns = _columns(['{"a": ' * depth + "1.50" + "}" * depth], ["x"])
    batch = _finish(columns, encoder.submit(_NAMES, columns, (0,), _JSONB))
    assert isinstance(batch, PreEncodedBatch)
    assert _written([batch]) == _reference([_expected(columns, _JSONB)])


def test_a_failed_future_falls_back_to_the_same_bytes() -> None:
    columns = _columns(['{"a": 1}'], ["x"])
    failed: Future[bytes | None] = Future()
    failed.set_exception(RuntimeError("the child could not take a value"))
    for future in (failed, None):
        batch = _finish(columns, future)
        assert not isinstance(batch, PreEncodedBatch)
        assert _written([batch]) == _reference([_expected(columns, _JSONB)])


def test_an_encoder_shut_down_under_a_batch_falls_back_but_a_cancelled_job_stops() -> None:
    columns = _columns(['{"a": 1}'], ["x"])

    async def shut_down_under() -> FastRowBatch:
        future: Future[bytes | None] = Future()
        asyncio.get_running_loop().call_later(0.05, future.cancel)
        return await _finish_async(columns, _JSONB, future)

    batch = asyncio.run(shut_down_under())
    assert _written([batch]) == _reference([_expected(columns, _JSONB)])

    async def cancelled_job() -> None:
        future: Future[bytes | None] = Future()
        task = asyncio.create_task(_finish_async(columns, _JSONB, future))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_job())


def test_no_child_before_start_or_after_close() -> None:
    encoder = BatchEncoder()
    columns = _columns(['{"a": 1}'], ["x"])
    assert encoder.submit(_NAMES, columns, (0,), _JSONB) is None  # not started
    encoder.close()
    encoder.start()  # a closed encoder never starts
    assert encoder.submit(_NAMES, columns, (0,), _JSONB) is None


def test_a_killed_child_is_not_replaced_and_batches_encode_in_process() -> None:
    columns = _columns(['{"a": 1.50}', None], ["x", "y"])
    expected = _reference([_expected(columns, _JSONB)])
    with BatchEncoder() as encoder:
        encoder.start()
        first = encoder.submit(_NAMES, columns, (0,), _JSONB)
        assert first is not None
        assert _written([_finish(columns, first)]) == expected
        executor = encoder._executor
        assert executor is not None
        for pid in list(executor._processes):
            os.kill(pid, signal.SIGKILL)
        after = [encoder.submit(_NAMES, columns, (0,), _JSONB) for _ in range(3)]
        for future in after:  # failed futures, then no child at all
            batch = _finish(columns, future)
            assert not isinstance(batch, PreEncodedBatch)
            assert _written([batch]) == expected
        assert encoder.submit(_NAMES, columns, (0,), _JSONB) is None


def _spawned_children() -> set[int]:
    """This process's children that multiprocessing spawned as pool workers."""
    return {pid for pid in descendants(os.getpid()) if b"spawn_main" in command_line(pid)}


def test_start_runs_one_child_however_many_callers_race() -> None:
    before = _spawned_children()
    with BatchEncoder() as encoder:
        callers = [threading.Thread(target=encoder.start) for _ in range(4)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        started = _spawned_children() - before
        assert len(started) == 1, started
        assert encoder.submit(_NAMES, _columns(['{"a": 1}'], ["x"]), (0,), _JSONB) is not None


def test_start_soon_returns_at_once_and_the_child_comes_up() -> None:
    columns = _columns(['{"a": 1}'], ["x"])
    with BatchEncoder() as encoder:
        encoder.start_soon()
        encoder.start_soon()  # once
        future = None
        for _ in range(200):
            future = encoder.submit(_NAMES, columns, (0,), _JSONB)
            if future is not None:
                break
            time.sleep(0.05)
        assert future is not None
        assert future.result(timeout=30) is not None
    closed = BatchEncoder()
    closed.close()
    closed.start_soon()  # a closed encoder starts nothing
    time.sleep(0.2)
    assert closed.submit(_NAMES, columns, (0,), _JSONB) is None
