"""The MySQL connector's batch columns (speed, issue 12): JSON parsed a whole column at a time,
float-free, so the batch writes itself through orjson with exactly the §5.4 bytes of the
engine's reference encoder; other-type columns of text are final as they are."""

from __future__ import annotations

from fetcher.adapters.fastjson import FastRowBatch
from fetcher.adapters.sql.mysql import _json_column, _other_column
from fetcher.engine.document import ROW_DEPTH
from fetcher.engine.values import ExactNumber
from tests.unit.document.test_batches import _reference, _written


def _batch(json: list[object], other: list[object]) -> FastRowBatch:
    return FastRowBatch(["doc", "u"], [json, other], json_columns=[0])


def test_a_json_column_keeps_every_number_text_and_encodes_itself() -> None:
    texts = ['{"a": 1.50, "b": [1, 2e3, -0], "c": null}', None, '"s"', "[1E+05]"]
    column = _json_column(texts)
    batch = _batch(column, ["x"] * 4)
    assert batch.encoded_rows(ROW_DEPTH) is not None
    assert _written([batch]) == _reference([batch])
    assert b'"a": 1.50' in _written([batch])
    assert b"1E+05" in _written([batch])
    first = batch[0]["doc"]
    assert isinstance(first, dict)
    assert first["a"] == ExactNumber("1.50")
    assert isinstance(first["a"], ExactNumber)


def test_text_that_is_not_json_stays_a_string() -> None:
    """A MariaDB ``longtext`` whose ``json_valid`` check was dropped may hold any text."""
    column = _json_column(['{"a": 1}', "not json", None])
    assert list(column) == [{"a": 1}, "not json", None]
    batch = _batch(list(column), ["x"] * 3)
    assert _written([batch]) == _reference([batch])


def test_bytes_json_values_are_parsed_one_by_one() -> None:
    column = _json_column([b'{"n": 2.50}', None])
    assert column[0] == {"n": ExactNumber("2.50")}
    assert column[1] is None


def test_other_columns_of_text_are_final_and_bytes_are_base64() -> None:
    texts = ("123e4567-e89b-12d3-a456-426614174000", None, 7)
    assert _other_column(texts) is texts
    assert _other_column((b"\x00\xff", None)) == ["AP8=", None]
