"""The engine end to end over the in-memory fakes: planning, fail-fast execution, the document."""

from __future__ import annotations

import hashlib
import json
from types import MappingProxyType

import pytest

import fetcher.engine
from fetcher.engine import (
    ConnectionDescriptor,
    Engine,
    EngineError,
    ErrorCategory,
    ExtractionRequest,
    Limits,
)
from fetcher.engine.filters.ast import Condition, FieldFilter, Operator
from fetcher.engine.testing import FakeDatabase, FakeRegistry, MemorySink
from fetcher.engine.types import Column, EngineType, TableSchema, TypeFamily

ACCOUNTS = TableSchema(
    "public",
    "accounts",
    (
        Column("id", TypeFamily.INTEGER),
        Column("email", TypeFamily.TEXT),
        Column("status", TypeFamily.TEXT),
    ),
)
INVOICES = TableSchema(
    "accounting",
    "invoices",
    (Column("id", TypeFamily.INTEGER), Column("amount", TypeFamily.DECIMAL)),
)
EMPTY = TableSchema("public", "empty", (Column("id", TypeFamily.INTEGER),))


def _pg() -> FakeDatabase:
    db = FakeDatabase()
    db.add(
        ACCOUNTS,
        [
            {"id": 1, "email": "a@example.com", "status": "active"},
            {"id": 2, "email": "b@example.com", "status": "closed"},
            {"id": 3, "email": None, "status": None},
        ],
    )
    db.add(INVOICES, [{"id": 7, "amount": "1500.00"}])
    db.add(EMPTY)
    return db


def _connections(*names: str) -> dict[str, ConnectionDescriptor]:
    return {n: ConnectionDescriptor(config_name=n, type=EngineType.POSTGRESQL) for n in names}


def _request(mapped: dict[str, dict[str, list[str]]], **kwargs: object) -> ExtractionRequest:
    fields = {ds: {t: tuple(f) for t, f in tables.items()} for ds, tables in mapped.items()}
    return ExtractionRequest(job_id="job-1", mapped_fields=fields, **kwargs)  # type: ignore[arg-type]


async def _run(
    request: ExtractionRequest, registry: FakeRegistry, **engine_kwargs: object
) -> tuple[MemorySink, fetcher.engine.ExtractionResult]:
    sink = MemorySink()
    engine = Engine(registry, **engine_kwargs)  # type: ignore[arg-type]
    result = await engine.run(request, _connections(*request.mapped_fields), sink)
    return sink, result


def test_public_surface_is_exactly_the_contract() -> None:
    assert sorted(fetcher.engine.__all__) == sorted(
        [
            "Limits",
            "DEFAULT_LIMITS",
            "ExtractionRequest",
            "ConnectionDescriptor",
            "Engine",
            "Plan",
            "ExtractionResult",
            "ErrorCategory",
            "EngineError",
            "Connector",
            "ConnectorRegistry",
            "ResultSink",
            "Clock",
        ]
    )


async def test_document_has_every_table_sorted_and_counts() -> None:
    registry = FakeRegistry({"pg": _pg(), "other": _pg()})
    request = _request(
        {
            "pg": {
                "public.accounts": ["id", "email"],
                "accounting.invoices": ["*"],
                "empty": ["*"],
            },
            "other": {"accounts": ["status"]},
        }
    )
    sink, result = await _run(request, registry)
    doc = json.loads(sink.data)
    assert list(doc) == ["other", "pg"]
    assert list(doc["pg"]) == ["accounting.invoices", "accounts", "empty"]
    assert doc["pg"]["empty"] == []
    assert doc["pg"]["accounting.invoices"] == [{"amount": "1500.00", "id": 7}]
    assert doc["pg"]["accounts"][0] == {"email": "a@example.com", "id": 1}
    assert doc["other"]["accounts"] == [
        {"status": "active"},
        {"status": "closed"},
        {"status": None},
    ]
    assert result.row_count == 7
    assert result.size_bytes == len(sink.data)
    assert result.sha256 == hashlib.sha256(sink.data).hexdigest()
    assert not sink.data.endswith(b"\n")


async def test_qualified_default_schema_merges_with_unqualified_key() -> None:
    request = _request({"pg": {"Public.accounts": ["id"], "accounts": ["email", "id"]}})
    sink, _ = await _run(request, FakeRegistry({"pg": _pg()}))
    assert json.loads(sink.data)["pg"]["accounts"][0] == {"email": "a@example.com", "id": 1}


async def test_filters_narrow_rows_and_null_semantics() -> None:
    spec = {
        "pg": {
            "accounts": (
                FieldFilter("status", (Condition(Operator.NE, ("closed",)),)),
                FieldFilter("id", (Condition(Operator.GTE, (1,)),)),
            )
        }
    }
    request = _request({"pg": {"accounts": ["id"]}}, filters=MappingProxyType(spec))
    sink, result = await _run(request, FakeRegistry({"pg": _pg()}))
    assert json.loads(sink.data)["pg"]["accounts"] == [{"id": 1}]
    assert result.row_count == 1


async def test_every_validation_issue_is_reported_in_order() -> None:
    registry = FakeRegistry({"a": _pg(), "b": _pg()})
    spec = {"a": {"invoices_x": (FieldFilter("id", (Condition(Operator.EQ, (1,)),)),)}}
    request = _request(
        {
            "b": {"accounts": ["id", "nope", "zzz"], "missing": ["id"]},
            "a": {"accounts": [], "x.y.z": ["id"]},
        },
        filters=MappingProxyType(spec),
    )
    with pytest.raises(EngineError) as caught:
        await _run(request, registry)
    assert caught.value.category is ErrorCategory.VALIDATION
    assert caught.value.message == (
        "extraction request failed schema validation: "
        "invalid table name 'x.y.z' in datasource 'a'; "
        "table 'accounts' in datasource 'a' selects no fields; "
        "filter references table 'invoices_x' that is not selected in datasource 'a'; "
        "unknown fields for table 'accounts' in datasource 'b': nope, zzz; "
        "table 'missing' not found in datasource 'b'"
    )


async def test_filter_on_unknown_field_and_bad_value() -> None:
    spec = {
        "pg": {
            "accounts": (
                FieldFilter("ghost", (Condition(Operator.EQ, (1,)),)),
                FieldFilter("id", (Condition(Operator.GT, ("abc",)),)),
            )
        }
    }
    request = _request({"pg": {"accounts": ["id"]}}, filters=MappingProxyType(spec))
    with pytest.raises(EngineError) as caught:
        await _run(request, FakeRegistry({"pg": _pg()}))
    message = caught.value.message
    assert (
        "filter references unknown field 'ghost' of table 'accounts' in datasource 'pg'" in message
    )
    assert "invalid filter value for field 'id' of table 'accounts' in datasource 'pg'" in message


async def test_connect_failure_reports_the_first_datasource_in_code_point_order() -> None:
    bad_a, bad_b = _pg(), _pg()
    bad_a.fail_on["connect"] = "refused A"
    bad_b.fail_on["discover"] = "catalog B"
    registry = FakeRegistry({"B": bad_b, "a": bad_a, "c": _pg()})
    request = _request({"a": {"accounts": ["id"]}, "B": {"accounts": ["id"]}, "c": {"x": ["id"]}})
    with pytest.raises(EngineError) as caught:
        await _run(request, registry)
    # "B" < "a" in code-point order; planning of every datasource still ran
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.text() == "failed to discover datasource schema 'B': catalog B"
    assert bad_a.opened == 0
    assert registry.databases["c"].opened == 1


async def test_fail_fast_cancels_other_datasources_and_writes_nothing() -> None:
    slow, broken = _pg(), _pg()
    slow.delay = 5.0
    broken.fail_on["stream"] = "boom"
    sink = MemorySink()
    request = _request({"slow": {"accounts": ["id"]}, "broken": {"accounts": ["id"]}})
    engine = Engine(FakeRegistry({"slow": slow, "broken": broken}))
    with pytest.raises(EngineError) as caught:
        await engine.run(request, _connections("slow", "broken"), sink)
    assert caught.value.text() == "failed to query datasource 'broken': boom"
    assert sink.chunks == []
    assert slow.closed == slow.opened  # the cancelled connector was closed


async def test_timeout_fails_with_the_deadline_text() -> None:
    slow = _pg()
    slow.delay = 5.0
    request = _request({"pg": {"accounts": ["id"]}}, limits=Limits(timeout_seconds=1))
    with pytest.raises(EngineError) as caught:
        await _run(request, FakeRegistry({"pg": slow}))
    assert caught.value.category is ErrorCategory.TIMEOUT
    assert caught.value.message == "execution exceeded its deadline"


async def test_result_over_the_size_limit_fails_and_stores_nothing() -> None:
    db = _pg()
    db.add(ACCOUNTS, [{"id": i, "email": "x" * 100, "status": "s"} for i in range(100)])
    request = _request({"pg": {"accounts": ["*"]}}, limits=Limits(max_result_bytes=2000))
    sink = MemorySink()
    with pytest.raises(EngineError) as caught:
        await Engine(FakeRegistry({"pg": db})).run(request, _connections("pg"), sink)
    assert caught.value.category is ErrorCategory.LIMIT_EXCEEDED
    assert (
        caught.value.message == "extraction result exceeds the configured size limit (2000 bytes)"
    )
    assert sink.chunks == []


async def test_exact_size_at_the_limit_passes() -> None:
    request = _request({"pg": {"accounts": ["id"]}})
    _, result = await _run(request, FakeRegistry({"pg": _pg()}))
    exact = _request(
        {"pg": {"accounts": ["id"]}}, limits=Limits(max_result_bytes=result.size_bytes)
    )
    _, again = await _run(exact, FakeRegistry({"pg": _pg()}))
    assert again.size_bytes == result.size_bytes
    over = _request(
        {"pg": {"accounts": ["id"]}}, limits=Limits(max_result_bytes=result.size_bytes - 1)
    )
    with pytest.raises(EngineError):
        await _run(over, FakeRegistry({"pg": _pg()}))


async def test_request_limits_above_the_engine_maximum_fail() -> None:
    request = _request({"pg": {"accounts": ["id"]}}, limits=Limits(max_concurrency=4))
    with pytest.raises(EngineError) as caught:
        await _run(request, FakeRegistry({"pg": _pg()}), limits=Limits(max_concurrency=2))
    assert (
        caught.value.message
        == "limit override exceeds the configured maximum: limits.maxConcurrency"
    )


async def test_too_many_tables_and_fields_are_issues() -> None:
    request = _request(
        {"pg": {"accounts": ["id", "email", "status"], "empty": ["id"]}},
        limits=Limits(max_tables_per_datasource=1, max_fields_per_table=2),
    )
    with pytest.raises(EngineError) as caught:
        await _run(request, FakeRegistry({"pg": _pg()}))
    assert "Maximum 1 tables allowed per datasource, got 2 for 'pg'" in caught.value.message
    assert "Maximum 2 fields allowed per table, got 3 for 'pg.accounts'" in caught.value.message


async def test_unknown_datasource_is_not_configured() -> None:
    request = _request({"pg": {"accounts": ["id"]}})
    with pytest.raises(EngineError) as caught:
        await Engine(FakeRegistry({})).plan(request, {})
    assert caught.value.message == "datasource 'pg' is not configured"


def test_engine_requires_a_registry() -> None:
    with pytest.raises(TypeError):
        Engine(None)  # type: ignore[arg-type]
