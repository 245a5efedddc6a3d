"""``parse_job_list``'s date-times: RFC 3339 forms beyond what ``fromisoformat`` reads."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fetcher.services.errors import ApiError
from fetcher.services.jobs.list_query import parse_job_list


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-01T10:00:00Z", datetime(2026, 3, 1, 10, tzinfo=UTC)),
        ("2026-03-01t10:00:00.123456789z", datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2026-03-01T12:00:00.5+02:00", datetime(2026, 3, 1, 10, 0, 0, 500000, tzinfo=UTC)),
        ("2016-12-31T23:59:60Z", datetime(2017, 1, 1, tzinfo=UTC)),
        ("2026-03-01", datetime(2026, 3, 1, tzinfo=UTC)),
    ],
)
def test_created_from_forms(text: str, expected: datetime) -> None:
    assert parse_job_list([("createdFrom", text)], max_limit=100).created_from == expected


@pytest.mark.parametrize(
    "text", ["2026-03-01T10:00:00", "2026-03-01T25:00:00Z", "2026-02-30", "2026-03-01T10:00Z"]
)
def test_malformed_date_times(text: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_job_list([("createdTo", text)], max_limit=100)
    assert caught.value.code == "FET-0408"
    assert list(caught.value.fields or {}) == ["createdTo"]
