"""``*`` batches of the MongoDB connector (speed, issue 12): uniform documents become a column
batch, others stay ``dict`` rows, and both are written with the same §5.4 bytes and rows as
the documents' own keys give (§3.2, §5.3)."""

from __future__ import annotations

from datetime import UTC, datetime

from bson.objectid import ObjectId

from fetcher.adapters.mongodb import _rows, encode_bson
from fetcher.engine.document import RowBatch, _rows_bytes

_DOCS = [
    {"_id": ObjectId("65a1b2c3d4e5f60718293a4b"), "n": 1, "x": 0.1, "doc": {"b": 1e-05, "a": [1]}},
    {"_id": ObjectId("65a1b2c3d4e5f60718293a4c"), "n": 2, "x": None, "doc": {}},
    {
        "_id": ObjectId("65a1b2c3d4e5f60718293a4d"),
        "n": 3,
        "x": 2.5,
        "doc": datetime(2026, 1, 2, tzinfo=UTC),
    },
]


def _dict_rows(documents: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{key: encode_bson(value) for key, value in doc.items()} for doc in documents]


def test_uniform_documents_are_a_column_batch_with_the_same_rows_and_bytes() -> None:
    batch = _rows(list(_DOCS), None)
    assert isinstance(batch, RowBatch)
    assert list(batch) == _dict_rows(_DOCS)
    assert _rows_bytes(batch) == _rows_bytes(_dict_rows(_DOCS))  # the writer's own path


def test_documents_with_other_keys_or_order_stay_dict_rows() -> None:
    reordered = [*_DOCS[:2], {"n": 4, "_id": _DOCS[2]["_id"], "x": 1.0, "doc": None}]
    missing = [*_DOCS[:2], {"_id": _DOCS[2]["_id"], "n": 5}]
    for documents in (reordered, missing):
        rows = _rows(documents, None)
        assert not isinstance(rows, RowBatch)
        assert rows == _dict_rows(documents)
    assert list(_rows([], None)) == []
