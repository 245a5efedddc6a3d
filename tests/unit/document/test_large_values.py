"""A large value on its way out is never copied whole past its encoding (§13 "Bounded memory").

One value is fetched whole (the driver holds it), and encoded once. From there on, every step
takes it a slice at a time, and the bytes are the same as in one piece:

* orjson's output is handed out as a view from :data:`_VIEW_FROM_BYTES` on, not cut out (a
  copy), and the writer copies a view out to its spool a megabyte at a time;
* the writer does not join a large piece to what it has buffered;
* the Worker's result sink seals and encodes a chunk a megabyte at a time, so the ciphertext,
  its base64 and the object's parts never exist whole;
* the batch encoder process is not handed a batch of megabytes (its arguments and result would
  be pickled copies), and such a batch is written before the next one is fetched.

The process-level figures are in ``tests/e2e/test_wide_rows_memory.py``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import AsyncGenerator, Sequence
from concurrent.futures import Future

import pytest

from fetcher.adapters.jsonlayout.encoder_process import (
    IN_HOST_BATCH_BYTES,
    TextBatch,
    encoded_batches,
)
from fetcher.adapters.jsonlayout.fastjson import _VIEW_FROM_BYTES, FastRowBatch, encode_rows
from fetcher.crypto import KeySet, decrypt_object
from fetcher.engine.document import DatasourceWriter, MemorySpool, RowBatch, dumps_document
from fetcher.engine.kit import ROW_DEPTH
from fetcher.services.jobs.extraction import SEAL_SLICE_BYTES, _EncryptingSink

MIB = 1024 * 1024
#: A value wider than every threshold here.
WIDE = "w" * (5 * MIB)


class RecordingSpool(MemorySpool):
    """A memory spool that records the size of every write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []

    async def write(self, data: bytes) -> None:
        self.writes.append(len(data))
        await super().write(data)


SMALL = RowBatch(("body", "id"), [["x"], [1]])


async def _written(batch: RowBatch) -> tuple[bytes, list[int]]:
    """A small row buffered, then ``batch``: the document and the size of each spool write."""
    spool = RecordingSpool()
    writer = DatasourceWriter(spool)
    await writer.open_table("t")
    await writer.write_rows(SMALL)
    await writer.write_rows(batch)
    await writer.close_table()
    await writer.close()
    return b'{\n  "d": ' + spool.getvalue() + b"\n}", spool.writes


def test_orjson_output_over_a_megabyte_is_a_view_with_the_same_bytes() -> None:
    batch = FastRowBatch(("body", "id"), [[WIDE], [7]])
    encoded = encode_rows(batch, ROW_DEPTH)
    assert isinstance(encoded, memoryview)
    small = encode_rows(FastRowBatch(("body", "id"), [["x" * 100], [7]]), ROW_DEPTH)
    assert isinstance(small, bytes)
    assert len(WIDE) > _VIEW_FROM_BYTES
    reference = RowBatch(("body", "id"), [[WIDE], [7]])
    assert bytes(encoded) == bytes(encode_rows(reference, ROW_DEPTH) or b"")


@pytest.mark.parametrize("kind", [FastRowBatch, RowBatch])
async def test_the_writer_passes_a_large_piece_on_in_slices_or_alone(
    kind: type[RowBatch],
) -> None:
    """A view (orjson's) is copied out a megabyte at a time; bytes (the engine's own encoder)
    go to the spool as they are, after the buffered row, not joined to it."""
    wide = kind(("body", "id"), [[WIDE], [2]])
    data, writes = await _written(wide)
    assert data == dumps_document({"d": {"t": [*SMALL, *wide]}})
    if kind is FastRowBatch:
        assert max(writes) <= MIB
    else:  # what was buffered goes first, then the encoded rows alone, not joined to it
        assert writes[0] < 100
        assert len(WIDE) < writes[1] < len(WIDE) + 64


class _Writer:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def write(self, chunk: bytes) -> None:
        self.chunks.append(chunk)


async def test_the_result_sink_seals_a_slice_at_a_time() -> None:
    keys = KeySet.from_master(os.urandom(32))
    writer = _Writer()

    async def open_writer() -> _Writer:
        return writer

    sink = _EncryptingSink(keys, open_writer, b64encode=base64.b64encode)
    plain = os.urandom(3 * SEAL_SLICE_BYTES + 12_345)
    await sink.write(b"head")
    await sink.write(plain)
    mac = await sink.finish()
    # base64 of at most one slice (and a carried byte or two) per write
    assert max(len(chunk) for chunk in writer.chunks) <= (SEAL_SLICE_BYTES + 20) * 4 // 3 + 4
    assert len(writer.chunks) >= 4
    stored = b"".join(writer.chunks)
    assert decrypt_object(keys.storage, stored) == b"head" + plain
    expected = hmac.new(keys.external_hmac, b"head" + plain, hashlib.sha256).hexdigest()
    assert mac == expected


class _Encoder:
    """The BatchEncoder's ``submit``: records what it was handed, encodes nothing."""

    def __init__(self) -> None:
        self.submitted: list[int] = []

    def submit(
        self, names: Sequence[str], columns: Sequence[Sequence[object]], *_: object
    ) -> Future[bytes | None]:
        self.submitted.append(len(columns[0]))
        future: Future[bytes | None] = Future()
        future.set_result(None)  # declined: the host encodes
        return future


async def test_a_wide_batch_skips_the_encoder_process_and_is_not_held_beside_the_next() -> None:
    events: list[str] = []
    wide: TextBatch = ([["w" * (IN_HOST_BATCH_BYTES + 1)], [1]], {})
    narrow: TextBatch = ([["n"] * 3, [1, 2, 3]], {})

    async def fetches() -> AsyncGenerator[TextBatch, None]:
        for name, batch in (("narrow", narrow), ("wide", wide), ("narrow again", narrow)):
            events.append(f"fetch {name}")
            yield batch

    encoder = _Encoder()
    source = encoded_batches(encoder, fetches(), (("body", "id"), ()))  # type: ignore[arg-type]
    async for batch in source:
        events.append(f"out {len(batch)}")
    assert encoder.submitted == [3, 3]  # never the wide batch
    # the narrow batch waits one fetch (its encoding overlaps it); the wide one goes out at once
    assert events == [
        "fetch narrow",
        "fetch wide",
        "out 3",
        "out 1",
        "fetch narrow again",
        "out 3",
    ]
