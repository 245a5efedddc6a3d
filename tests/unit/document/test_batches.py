"""The batch fast paths of the §5.4 writer: ``RowBatch`` columns and lists of flat ``dict`` rows
must give exactly the bytes of the reference encoder ``dumps_document``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fetcher.engine.document import (
    DatasourceWriter,
    MemorySpool,
    RowBatch,
    _batch_text,
    _columns_of,
    _dicts_text,
    dumps_document,
)
from fetcher.engine.ports import Row
from fetcher.engine.values import ExactNumber

# --- strategies -----------------------------------------------------------------------------

_ALPHABET = st.characters(codec="utf-8")
_PIECES = st.sampled_from(
    ['"', "\\", "\n", "\x00", "\x1f", "%", "%s", "None", "null", "}, {", "é", "\ud83d", "\ude00"]
)
_names = st.lists(_ALPHABET | _PIECES, max_size=4).map("".join)
_plain_text = st.text(st.characters(codec="utf-8", min_codepoint=0x20, exclude_characters='"\\'))
_text = st.lists(_ALPHABET | _PIECES, max_size=8).map("".join) | _plain_text | st.just("None")
_ints = st.integers(min_value=-(10**30), max_value=10**30) | st.sampled_from([0, -1, 2**63])
_floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
_odd = st.sampled_from(
    [float("nan"), float("inf"), 10**4500, ExactNumber("1.10"), [1, "a"], {"k": None}, (1,)]
)
# one kind per column most of the time (as a connector yields), sometimes mixed or odd
_column_kinds = st.sampled_from(["int", "text", "float", "bool", "mixed", "odd"])
_KIND_VALUES = {
    "int": _ints,
    "text": _text,
    "float": _floats,
    "bool": st.booleans(),
    "mixed": _ints | _text | _floats | st.booleans(),
    "odd": _odd | _ints | _text,
}


@st.composite
def _batches(draw: st.DrawFn) -> RowBatch:
    names = draw(st.lists(_names, min_size=1, max_size=5))
    length = draw(st.integers(min_value=1, max_value=6))
    columns: list[list[object]] = []
    for _ in names:
        values = _KIND_VALUES[draw(_column_kinds)]
        nullable = draw(st.booleans())
        column = draw(
            st.lists(st.none() | values if nullable else values, min_size=length, max_size=length)
        )
        columns.append(column)
    return RowBatch(names, columns)


_flat_scalars = st.none() | st.booleans() | _ints | _floats | _text
_flat_dict_rows = st.lists(
    st.dictionaries(_names, _flat_scalars | _odd, min_size=0, max_size=5), min_size=1, max_size=6
)


@st.composite
def _same_key_dict_rows(draw: st.DrawFn) -> list[dict[str, object]]:
    """``dict`` rows as most connectors yield them: the same keys, in the same order."""
    batch = draw(_batches())
    return [dict(row) for row in batch]


# --- helpers --------------------------------------------------------------------------------


def _written(batches: Sequence[Sequence[Row]]) -> bytes:
    """One datasource ``d`` with one table ``t``, written batch by batch, framed as a document
    (the framing equals :func:`dumps_document`'s)."""

    async def run() -> bytes:
        spool = MemorySpool()
        writer = DatasourceWriter(spool)
        await writer.open_table("t")
        for batch in batches:
            await writer.write_rows(batch)
        await writer.close_table()
        await writer.close()
        return spool.getvalue()

    return b'{\n  "d": ' + asyncio.run(run()) + b"\n}"


def _reference(batches: Sequence[Sequence[Row]]) -> bytes:
    rows = [dict(row) for batch in batches for row in batch]
    return dumps_document({"d": {"t": rows}})


# --- properties -----------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.lists(_batches(), min_size=1, max_size=3))
def test_row_batches_match_reference_encoder(batches: list[RowBatch]) -> None:
    assert _written(batches) == _reference(batches)


@settings(max_examples=300, deadline=None)
@given(st.lists(_flat_dict_rows, min_size=1, max_size=3))
def test_dict_batches_match_reference_encoder(batches: list[list[dict[str, object]]]) -> None:
    assert _written(batches) == _reference(batches)


@settings(max_examples=300, deadline=None)
@given(st.lists(_same_key_dict_rows(), min_size=1, max_size=3))
def test_same_key_dict_batches_match_reference_encoder(
    batches: list[list[dict[str, object]]],
) -> None:
    assert _written(batches) == _reference(batches)


@settings(max_examples=200, deadline=None)
@given(_batches())
def test_row_batch_is_a_sequence_of_dict_rows(batch: RowBatch) -> None:
    rows = [
        dict(zip(batch.names, values, strict=True)) for values in zip(*batch.columns, strict=True)
    ]
    assert list(batch) == rows
    assert len(batch) == len(rows)
    assert [batch[i] for i in range(-len(rows), len(rows))] == rows + rows
    assert list(batch[1:]) == rows[1:]
    assert isinstance(batch[1:], RowBatch)


# --- examples -------------------------------------------------------------------------------


def test_fast_paths_take_plain_batches() -> None:
    batch = RowBatch(
        ["s", "%k", "i", "n"],
        [["a", None, "None x"], ["b", "c", "d"], [1, None, 10**40], [None, None, None]],
    )
    text = _batch_text(batch)
    assert text is not None
    assert '"%k": "b"' in text
    assert '"s": null' in text
    assert _written([batch]) == _reference([batch])
    rows = list(batch)
    assert _dicts_text(rows) is not None
    assert _columns_of(rows) is not None
    assert _written([rows]) == _reference([rows])
    reordered = [rows[0], dict(reversed(list(rows[1].items())))]
    assert _columns_of(reordered) is None
    assert _written([reordered]) == _reference([reordered])


@pytest.mark.parametrize(
    ("column", "fast"),
    [
        (["None", None], True),  # "None" next to a null: the strings take the C encoder
        (['q"', None], True),  # a string to escape: the C encoder
        ([1.5, None], True),
        ([True, None], True),
        ([float("nan"), 1.0], False),  # the C encoder refuses it: row by row
        ([10**5000, 1], False),
        ([ExactNumber("1.10"), None], False),
        ([[1], None], False),
    ],
)
def test_batch_columns_fast_or_fallback(column: list[object], fast: bool) -> None:
    batch = RowBatch(["v", "w"], [column, ["x"] * len(column)])
    assert (_batch_text(batch) is not None) is fast
    assert _written([batch]) == _reference([batch])


def test_duplicate_or_empty_names_take_the_dict_path() -> None:
    batch = RowBatch(["a", "a"], [[1, 2], [3, 4]])
    assert _batch_text(batch) is None
    assert _written([batch]) == _reference([batch])
    assert list(batch) == [{"a": 3}, {"a": 4}]
    assert _dicts_text([{}, {"a": 1}]) is None
    assert _written([[{}, {"a": 1}]]) == _reference([[{}, {"a": 1}]])


def test_row_batch_checks_its_shape() -> None:
    with pytest.raises(ValueError, match="one column per name"):
        RowBatch(["a"], [])
    with pytest.raises(ValueError, match="same length"):
        RowBatch(["a", "b"], [[1], [1, 2]])
    batch = RowBatch(["a"], [[1, 2]])
    with pytest.raises(IndexError):
        batch[2]
    with pytest.raises(IndexError):
        batch[-3]
    assert not RowBatch([], [])
    assert repr(batch) == "RowBatch(('a',), 2 rows)"
