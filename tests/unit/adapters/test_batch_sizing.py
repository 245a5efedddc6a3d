"""Rows per fetch bounded by bytes (``fetcher.adapters.batch_sizing``)."""

from __future__ import annotations

import time

import pytest

from fetcher.adapters.batch_sizing import (
    BATCH_TARGET_BYTES,
    FIRST_BATCH_ROWS,
    BatchSizer,
    row_bytes,
)


def test_row_bytes_counts_text_and_binary_by_length() -> None:
    row = ("x" * 1000, b"y" * 500, None, 12, 1.5)
    assert row_bytes(row) == 1000 + 500 + 3 * 8


def test_row_bytes_extrapolates_long_containers_and_counts_keys() -> None:
    array = ["abcd"] * 10_000
    assert row_bytes(array) == 40_000
    document = {f"k{i:03}": "v" * 100 for i in range(1_000)}
    assert row_bytes(document) == 1_000 * (4 + 100)


def test_row_bytes_is_bounded_work_on_deep_and_huge_values() -> None:
    deep: object = "leaf"
    for _ in range(100_000):
        deep = [deep]
    huge = [["z" * 10] * 1_000] * 1_000
    started = time.perf_counter()
    assert row_bytes(deep) == 8  # nested past the depth bound: one scalar's worth
    assert row_bytes(huge) == 10_000_000
    assert time.perf_counter() - started < 1.0


def test_first_fetch_is_small_then_narrow_rows_take_the_maximum() -> None:
    sizer = BatchSizer(2_000)
    # One row first: before any row is seen, the widest possible batch is a single row.
    assert sizer.rows == FIRST_BATCH_ROWS == 1
    seen = []
    for _ in range(3):
        sizer.observe([("id", "a" * 100)] * sizer.rows)
        seen.append(sizer.rows)
    assert seen == [2000, 2000, 2000]


def test_wide_rows_shrink_the_next_fetch_to_the_target() -> None:
    sizer = BatchSizer(2_000)
    sizer.observe([("id", "w" * 150_000)] * FIRST_BATCH_ROWS)
    assert sizer.rows == BATCH_TARGET_BYTES // 150_002
    rows_held = sizer.rows * 150_002
    assert BATCH_TARGET_BYTES - 150_002 < rows_held <= BATCH_TARGET_BYTES


def test_a_row_wider_than_the_target_is_fetched_alone() -> None:
    sizer = BatchSizer(2_000)
    sizer.observe([("x" * (BATCH_TARGET_BYTES * 3),)])
    assert sizer.rows == 1


def test_the_estimate_follows_each_batch() -> None:
    sizer = BatchSizer(2_000)
    sizer.observe([("w" * (BATCH_TARGET_BYTES // 4),)] * FIRST_BATCH_ROWS)
    assert sizer.rows == 4
    sizer.observe([("n" * 1_000,)] * 4)
    assert sizer.rows == BATCH_TARGET_BYTES // 1_000
    sizer.observe([("w" * BATCH_TARGET_BYTES,)] * 3)
    assert sizer.rows == 1


def test_an_empty_batch_changes_nothing() -> None:
    sizer = BatchSizer(10, first_rows=3)
    sizer.observe([])
    assert sizer.rows == 3


@pytest.mark.parametrize("kwargs", [{"max_rows": 0}, {"max_rows": 5, "target_bytes": 0}])
def test_sizes_must_be_positive(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="positive"):
        BatchSizer(**kwargs)


def test_first_fetch_never_exceeds_the_maximum() -> None:
    assert BatchSizer(5, first_rows=8).rows == 5
