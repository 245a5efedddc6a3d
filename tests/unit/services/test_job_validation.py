"""§3.6 steps 3-12 of ``POST /v1/fetcher``: exact codes, titles, messages and fields."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fetcher.engine.limits import DEFAULT_LIMITS, Limits
from fetcher.manager.errors import title_for
from fetcher.services.errors import MISSING_FIELDS_MESSAGE, ApiError
from fetcher.services.jobs.validation import ValidatedJob, validate_job_request


def _body(**data_request: Any) -> dict[str, Any]:
    dr: dict[str, Any] = {"mappedFields": {"pg": {"accounts": ["id", "email"]}}}
    dr.update(data_request)
    return {"dataRequest": dr, "metadata": {"source": "payments"}}


def _ok(body: dict[str, Any], limits: Limits = DEFAULT_LIMITS) -> ValidatedJob:
    return validate_job_request(body, max_limits=limits)


def _fail(body: dict[str, Any], limits: Limits = DEFAULT_LIMITS) -> ApiError:
    with pytest.raises(ApiError) as caught:
        validate_job_request(body, max_limits=limits)
    return caught.value


def _expect(err: ApiError, code: str, title: str | None, message: str) -> None:
    assert (err.code, title_for(err), err.message) == (code, title, message)


# --- success ------------------------------------------------------------------------------


def test_valid_body() -> None:
    body = _body(
        filters={"pg": {"accounts": {"status": {"eq": ["active"]}}}},
        limits={"maxConcurrency": 2},
    )
    body["metadata"] = {"source": "  Payments ", "correlationId": "c-1", "n": 1.5, "x": None}
    job = _ok(body)
    assert job.mapped_fields == {"pg": {"accounts": ["id", "email"]}}
    assert job.source == "payments"
    assert job.metadata["source"] == "  Payments "
    assert job.limits.max_concurrency == 2
    assert job.limits.max_datasources == 10
    assert job.raw_limits == {"maxConcurrency": 2}
    assert job.raw_filters == {"pg": {"accounts": {"status": {"eq": ["active"]}}}}
    assert list(job.filters) == ["pg"]
    assert len(job.request_hash) == 64


@pytest.mark.parametrize("empty", [None, {}])
def test_empty_filters_and_limits_mean_none(empty: object) -> None:
    job = _ok(_body(filters=empty, limits=empty))
    assert job.raw_filters is None
    assert job.raw_limits is None
    assert dict(job.filters) == {}
    assert job.limits == DEFAULT_LIMITS
    assert job.request_hash == _ok(_body()).request_hash


# --- step 3 -------------------------------------------------------------------------------


def test_step3_unknown_top_level() -> None:
    body = _body()
    body["extra"] = 1
    err = _fail(body)
    assert err.code == "FET-0400"
    assert err.fields == {"extra": "unexpected field"}


def test_step3_unknown_in_data_request_and_limits_together() -> None:
    body = _body(foo=1, limits={"maxRows": 1, "maxConcurrency": 1})
    body["bar"] = True
    err = _fail(body)
    assert err.code == "FET-0400"
    assert err.fields == {
        "bar": "unexpected field",
        "dataRequest.foo": "unexpected field",
        "dataRequest.limits.maxRows": "unexpected field",
    }


def test_step3_runs_before_step4() -> None:
    err = _fail({"metadata": {"source": "x"}, "other": 1})
    assert err.code == "FET-0400"


# --- step 4 and 4a ------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{"metadata": {"source": "x"}}, {"dataRequest": None}])
def test_step4_data_request_missing(body: dict[str, Any]) -> None:
    err = _fail(body)
    _expect(err, "FET-0402", "Missing Fields in Request", MISSING_FIELDS_MESSAGE)
    assert err.fields == {"dataRequest": "dataRequest is a required field"}


@pytest.mark.parametrize("data_request", [{}, {"mappedFields": None}, {"filters": {}}])
def test_step4_mapped_fields_missing(data_request: dict[str, Any]) -> None:
    err = _fail({"dataRequest": data_request, "metadata": {"source": "x"}})
    _expect(err, "FET-0402", "Missing Fields in Request", MISSING_FIELDS_MESSAGE)
    assert err.fields == {
        "dataRequest.mappedFields": "dataRequest.mappedFields is a required field"
    }


@pytest.mark.parametrize("value", ["x", 1, [], True])
def test_step4a_data_request_not_an_object(value: object) -> None:
    err = _fail({"dataRequest": value, "metadata": {"source": "x"}})
    _expect(err, "FET-0401", "Invalid Data Request", "dataRequest must be an object")
    assert err.fields is None


@pytest.mark.parametrize("value", ["x", 1, [], False])
def test_step4a_mapped_fields_not_an_object(value: object) -> None:
    err = _fail(_body(mappedFields=value))
    _expect(err, "FET-0401", "Invalid Data Request", "mappedFields must be an object")


# --- step 5 -------------------------------------------------------------------------------


def test_step5_empty_mapped_fields() -> None:
    _expect(
        _fail(_body(mappedFields={})),
        "FET-0401",
        "Invalid Data Request",
        "mappedFields cannot be empty",
    )


def test_step5_wildcard_mixed() -> None:
    err = _fail(_body(mappedFields={"pg": {"accounts": ["*", "id"]}}))
    _expect(
        err,
        "FET-0401",
        "Invalid Data Request",
        "wildcard '*' must be the only entry in the field list for 'pg.accounts'",
    )


def test_step5_wildcard_alone_passes() -> None:
    assert _ok(_body(mappedFields={"pg": {"accounts": ["*"]}})).mapped_fields


@pytest.mark.parametrize("tables", [{}, {"a": []}, {"a": [], "b": []}])
def test_step5_empty_datasource(tables: dict[str, Any]) -> None:
    err = _fail(_body(mappedFields={"pg": tables}))
    _expect(
        err,
        "FET-0401",
        "Invalid Data Request",
        "datasource 'pg' must have at least one table with fields",
    )


def test_step5_one_empty_table_in_a_valid_datasource_passes() -> None:
    assert _ok(_body(mappedFields={"pg": {"a": [], "b": ["id"]}}))


@pytest.mark.parametrize(
    "mapped",
    [
        {"": {"a": ["id"]}},
        {"  ": {"a": ["id"]}},
        {" pg": {"a": ["id"]}},
        {"pg": {"": ["id"]}},
        {"pg": {"a ": ["id"]}},
        {"pg": {"t" * 257: ["id"]}},
        {"pg": {"a": [""]}},
        {"pg": {"a": ["id", " id"]}},
        {"pg": {"a": ["f" * 257]}},
        {"pg": {"a": [1]}},
        {"pg": {"a": [None]}},
        {"pg": {"a": "id"}},
        {"pg": {"a": {"id": 1}}},
        {"pg": ["a"]},
        {"pg": None},
    ],
)
def test_step5_shape_and_names(mapped: dict[str, Any]) -> None:
    err = _fail(_body(mappedFields=mapped))
    assert (err.code, title_for(err)) == ("FET-0401", "Invalid Data Request")


def test_step5_name_lengths_at_the_bound_pass() -> None:
    assert _ok(_body(mappedFields={"pg": {"t" * 256: ["f" * 256]}}))


def test_step5_duplicates_are_kept_as_submitted() -> None:
    job = _ok(_body(mappedFields={"pg": {"a": ["id", "id"]}}))
    assert job.mapped_fields == {"pg": {"a": ["id", "id"]}}


# --- step 6 -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, True, False, 1.5, 2.0, "2", None, [1]])
def test_step6_limit_not_a_positive_integer(value: object) -> None:
    err = _fail(_body(limits={"maxConcurrency": value}))
    _expect(
        err, "FET-0401", "Invalid Data Request", "limits.maxConcurrency must be a positive integer"
    )


def test_step6_limit_above_maximum() -> None:
    err = _fail(_body(limits={"maxDatasources": 11}))
    _expect(
        err,
        "FET-0401",
        "Invalid Data Request",
        "limit override exceeds the configured maximum: limits.maxDatasources",
    )


def test_step6_limit_above_a_configured_lower_maximum() -> None:
    err = _fail(_body(limits={"maxResultBytes": 1001}), Limits(max_result_bytes=1000))
    assert err.message == "limit override exceeds the configured maximum: limits.maxResultBytes"


def test_step6_limits_not_an_object() -> None:
    _expect(
        _fail(_body(limits=[1])), "FET-0401", "Invalid Data Request", "limits must be an object"
    )


def test_step6_runs_after_step5() -> None:
    err = _fail(_body(mappedFields={}, limits={"maxConcurrency": 0}))
    assert err.message == "mappedFields cannot be empty"


# --- step 7 -------------------------------------------------------------------------------


def test_step7_datasource_count() -> None:
    mapped = {f"ds{i}": {"t": ["id"]} for i in range(3)}
    err = _fail(_body(mappedFields=mapped, limits={"maxDatasources": 2}))
    _expect(err, "FET-0401", "Invalid Data Request", "Maximum 2 datasources allowed per job, got 3")


def test_step7_datasource_count_default() -> None:
    mapped = {f"ds{i}": {"t": ["id"]} for i in range(11)}
    assert (
        _fail(_body(mappedFields=mapped)).message
        == "Maximum 10 datasources allowed per job, got 11"
    )


def test_step7_table_count() -> None:
    mapped = {"pg": {f"t{i}": ["id"] for i in range(21)}}
    err = _fail(_body(mappedFields=mapped))
    assert err.message == "Maximum 20 tables allowed per datasource, got 21 for 'pg'"


def test_step7_field_count_before_dedup() -> None:
    mapped = {"pg": {"t": ["id", "id", "id"]}}
    err = _fail(_body(mappedFields=mapped, limits={"maxFieldsPerTable": 2}))
    _expect(
        err,
        "FET-0401",
        "Invalid Data Request",
        "Maximum 2 fields allowed per table, got 3 for 'pg.t'",
    )


def test_step7_at_the_bound_passes() -> None:
    mapped = {
        f"ds{i}": {f"t{j}": [f"f{k}" for k in range(50)] for j in range(20)} for i in range(10)
    }
    assert _ok(_body(mappedFields=mapped)).limits == DEFAULT_LIMITS


# --- steps 8 to 10 ------------------------------------------------------------------------


@pytest.mark.parametrize("metadata", ["absent", None, "x", ["source"], 1])
def test_step8_metadata_missing_or_not_an_object(metadata: object) -> None:
    body = _body()
    if metadata == "absent":
        del body["metadata"]
    else:
        body["metadata"] = metadata
    err = _fail(body)
    _expect(
        err,
        "FET-0402",
        "Missing Required Field",
        "metadata is required and must contain 'source' field",
    )


@pytest.mark.parametrize("metadata", [{}, {"source": None}, {"other": "x"}])
def test_step9_source_missing(metadata: dict[str, Any]) -> None:
    body = _body()
    body["metadata"] = metadata
    err = _fail(body)
    _expect(
        err,
        "FET-0402",
        "Missing Required Field",
        "metadata.source is required for job notification routing",
    )


@pytest.mark.parametrize("source", ["", "   ", 1, True, ["x"], {"a": 1}])
def test_step10_source_not_a_non_blank_string(source: object) -> None:
    body = _body()
    body["metadata"] = {"source": source}
    err = _fail(body)
    _expect(err, "FET-0402", "Invalid Field Value", "metadata.source must be a non-empty string")


def test_step8_runs_after_step7() -> None:
    body = _body(mappedFields={f"ds{i}": {"t": ["id"]} for i in range(11)})
    del body["metadata"]
    assert _fail(body).code == "FET-0401"


# --- step 11 ------------------------------------------------------------------------------


def _with_metadata(**extra: object) -> dict[str, Any]:
    body = _body()
    body["metadata"] = {"source": "payments", **extra}
    return body


@pytest.mark.parametrize("value", [{"a": 1}, [1], []])
def test_step11_nested(value: object) -> None:
    err = _fail(_with_metadata(k=value))
    assert (err.code, err.fields) == (
        "FET-0410",
        {"metadata.k": "metadata value must be a string, number, boolean or null"},
    )


def test_step11_value_length() -> None:
    assert _ok(_with_metadata(k="v" * 2000))
    err = _fail(_with_metadata(k="v" * 2001))
    assert (err.code, err.fields) == (
        "FET-0411",
        {"metadata.k": "metadata value must not exceed 2000 characters"},
    )


def test_step11_key_length() -> None:
    assert _ok(_with_metadata(**{"k" * 100: 1}))
    err = _fail(_with_metadata(**{"k" * 101: 1}))
    assert (err.code, err.fields) == (
        "FET-0412",
        {f"metadata.{'k' * 101}": "metadata key must be 1 to 100 characters"},
    )


def test_step11_empty_key() -> None:
    err = _fail(_with_metadata(**{"": "x"}))
    assert (err.code, err.fields) == (
        "FET-0412",
        {"metadata.": "metadata key must be 1 to 100 characters"},
    )


def test_step11_scalars_pass() -> None:
    assert _ok(_with_metadata(a=1, b=1.5, c=True, d=None, e="x"))


# --- step 12 ------------------------------------------------------------------------------


def test_step12_unknown_operator() -> None:
    err = _fail(_body(filters={"pg": {"accounts": {"id": {"regex": ["x"]}}}}))
    _expect(
        err, "FET-0401", "Invalid Data Request", "unknown filter operator 'regex' for field 'id'"
    )


def test_step12_arity() -> None:
    err = _fail(_body(filters={"pg": {"accounts": {"id": {"between": [1]}}}}))
    _expect(
        err,
        "FET-0401",
        "Invalid Data Request",
        "between operator for field 'id' must have exactly 2 values, got 1",
    )


def test_step12_unknown_datasources_sorted_and_joined() -> None:
    err = _fail(_body(filters={"zz": {"t": {"a": {"eq": [1]}}}, "mm": {"t": {"a": {"eq": [1]}}}}))
    _expect(
        err,
        "FET-0401",
        "Invalid Filter References",
        "filter references unknown datasource 'mm' not found in mappedFields; "
        "filter references unknown datasource 'zz' not found in mappedFields",
    )


def test_step12_filters_not_an_object() -> None:
    _expect(
        _fail(_body(filters=[1])), "FET-0401", "Invalid Data Request", "filters must be an object"
    )


def test_step12_runs_after_step11() -> None:
    body = _with_metadata(k={"nested": 1})
    body["dataRequest"]["filters"] = {"nope": {"t": {"a": {"eq": [1]}}}}
    assert _fail(body).code == "FET-0410"


def test_input_is_not_modified() -> None:
    body = _body(filters={"pg": {"accounts": {"id": {"eq": [1]}}}}, limits={"maxConcurrency": 1})
    before = copy.deepcopy(body)
    _ok(body)
    assert body == before
