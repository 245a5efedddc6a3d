"""§14.2 byte ranges of the download route: one range served, anything else the whole object,
a range past the end 416 with ``Content-Range: bytes */<size>``."""

from __future__ import annotations

import pytest

from fetcher.services.errors import ApiError
from fetcher.services.jobs.download import byte_range

SIZE = 1000


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("bytes=0-99", (0, 99)),
        ("bytes=100-", (100, 999)),
        ("bytes=990-5000", (990, 999)),
        ("bytes=-10", (990, 999)),
        ("bytes=-5000", (0, 999)),
        ("bytes=999-999", (999, 999)),
        ("bytes=5-2", None),  # an invalid range-spec: ignored
        ("bytes=0-1,5-6", None),  # several ranges: the whole object
        ("items=0-1", None),
        ("bytes=abc", None),
    ],
)
def test_ranges(header: str | None, expected: tuple[int, int] | None) -> None:
    assert byte_range(header, SIZE) == expected


@pytest.mark.parametrize("header", ["bytes=1000-", "bytes=1000-2000", "bytes=-0"])
def test_unsatisfiable(header: str) -> None:
    with pytest.raises(ApiError) as raised:
        byte_range(header, SIZE)
    assert raised.value.code == "FET-1102"
    assert raised.value.headers == {"Content-Range": "bytes */1000"}
