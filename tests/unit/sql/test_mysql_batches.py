"""The MySQL connector's batch columns (speed, issue 12): JSON parsed a whole column at a time,
float-free, so the batch writes itself through orjson with exactly the §5.4 bytes of the
engine's reference encoder; other-type columns of text are final as they are."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.adapters.jsonlayout.fastjson import FastRowBatch
from fetcher.adapters.sql.mysql import _json_column, _other_column
from fetcher.engine.document import ROW_DEPTH
from fetcher.engine.values import ExactNumber, parse_json_exact
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


_NUMBERS = st.one_of(
    st.sampled_from(["-0", "0", "-0.0", "-0e1", "1.50", "2e3", "-12", "1E+05", "0.1250"]),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
_STRINGS = st.sampled_from(['"R-0"', '"-0"', '"a-0b"', '"x"', '"-0.5"']) | st.text(max_size=5).map(
    json.dumps
)


@st.composite
def _json_texts(draw: st.DrawFn) -> str:
    """A JSON text as MariaDB may store it: objects, arrays, numbers in any valid spelling,
    strings that look like ``-0``, with or without spaces."""
    leaves = _NUMBERS | _STRINGS | st.sampled_from(["true", "null"])
    members = st.lists(st.tuples(_STRINGS, leaves), max_size=4)
    sep = draw(st.sampled_from([", ", ","]))
    pairs = draw(members)
    items = draw(st.lists(leaves, max_size=4))
    return draw(
        st.sampled_from(
            [
                "{" + sep.join(f"{key}: {value}" for key, value in pairs) + "}",
                "[" + sep.join(items) + "]",
                items[0] if items else "-0",
            ]
        )
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_json_texts(), st.none()), min_size=1, max_size=12))
def test_a_json_column_writes_the_bytes_of_the_exact_parse(texts: list[str | None]) -> None:
    """Whichever integer path the batch takes (``-0`` anywhere or not), the batch's bytes are
    those of each text parsed exactly (:func:`parse_json_exact`), number texts kept."""
    column = _json_column(texts)
    exact = [None if text is None else parse_json_exact(text) for text in texts]
    batch = _batch(column, ["x"] * len(texts))
    expected = FastRowBatch(["doc", "u"], [exact, ["x"] * len(texts)])
    assert _written([batch]) == _reference([expected])
    assert _reference([batch]) == _reference([expected])  # read back: the same values
