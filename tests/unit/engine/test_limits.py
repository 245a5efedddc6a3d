"""§3.5: a request can lower a limit, never raise one."""

from __future__ import annotations

import pytest

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.limits import DEFAULT_LIMITS, MAX_RESULT_BYTES_CEILING, Limits


def test_defaults_are_the_contract_values() -> None:
    assert DEFAULT_LIMITS == Limits(10, 20, 50, 4, 300, 268_435_456)


def test_lowering_each_limit() -> None:
    lowered = DEFAULT_LIMITS.lowered(
        {
            "maxDatasources": 1,
            "maxTablesPerDatasource": 2,
            "maxFieldsPerTable": 3,
            "maxConcurrency": 1,
            "timeoutSeconds": 5,
            "maxResultBytes": 1024,
        }
    )
    assert lowered == Limits(1, 2, 3, 1, 5, 1024)


def test_equal_to_the_maximum_is_allowed() -> None:
    assert DEFAULT_LIMITS.lowered({"maxConcurrency": 4}).max_concurrency == 4


def test_empty_or_none_overrides_keep_the_limits() -> None:
    assert DEFAULT_LIMITS.lowered(None) is DEFAULT_LIMITS
    assert DEFAULT_LIMITS.lowered({}) is DEFAULT_LIMITS


@pytest.mark.parametrize("name", ["maxDatasources", "timeoutSeconds", "maxResultBytes"])
def test_raising_a_limit_is_refused_with_its_name(name: str) -> None:
    with pytest.raises(EngineError) as caught:
        DEFAULT_LIMITS.lowered({name: 10**12})
    assert caught.value.category is ErrorCategory.VALIDATION
    assert caught.value.message == f"limit override exceeds the configured maximum: limits.{name}"


@pytest.mark.parametrize("value", [0, -1, True, False, 1.0, 5.5, "5", None, [1]])
def test_override_must_be_a_positive_json_integer(value: object) -> None:
    with pytest.raises(EngineError) as caught:
        DEFAULT_LIMITS.lowered({"maxConcurrency": value})
    assert caught.value.message == "limits.maxConcurrency must be a positive integer"


def test_the_worker_maximum_is_checked_against_its_own_limits() -> None:
    worker = DEFAULT_LIMITS.with_result_ceiling(1000)
    with pytest.raises(EngineError, match=r"limits\.maxResultBytes$"):
        worker.lowered({"maxResultBytes": 1001})


@pytest.mark.parametrize(
    ("configured", "expected"),
    [
        (None, MAX_RESULT_BYTES_CEILING),
        (0, MAX_RESULT_BYTES_CEILING),
        (-5, MAX_RESULT_BYTES_CEILING),
        (1, 1),
        (MAX_RESULT_BYTES_CEILING * 2, MAX_RESULT_BYTES_CEILING),
    ],
)
def test_engine_max_result_bytes_only_lowers(configured: int | None, expected: int) -> None:
    assert DEFAULT_LIMITS.with_result_ceiling(configured).max_result_bytes == expected


def test_engine_error_text_and_str() -> None:
    err = EngineError(ErrorCategory.CONNECT, "failed to connect to datasource 'pg'", detail="x")
    assert str(err) == "engine: [connect] failed to connect to datasource 'pg'"
    assert err.text() == "failed to connect to datasource 'pg': x"
    assert err.text(lambda d: "[redacted]") == "failed to connect to datasource 'pg': [redacted]"
    long = EngineError(ErrorCategory.INTERNAL, "é" * 2500)
    assert len(long.text()) == 2000
    assert long.text().endswith("...")
