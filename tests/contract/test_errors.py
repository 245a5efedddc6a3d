"""Failures map to the §4.5 categories and texts, with no secret in them."""

from __future__ import annotations

import time

import pytest

from fetcher.engine import ConnectionDescriptor, EngineError, ErrorCategory
from fetcher.engine.ports import TableQuery
from fetcher.engine.types import Column, TableSchema, TypeFamily
from tests.contract.conftest import Harness


def _assert_redacted(h: Harness, exc: EngineError) -> None:
    texts = (str(exc), repr(exc), exc.message, exc.detail or "")
    for secret in h.loaded.secrets:
        for text in texts:
            assert secret not in text


async def _connect_error(h: Harness, descriptor: ConnectionDescriptor) -> EngineError:
    connector = h.engine.registry(h.loaded, 2_000).connector_for(descriptor)
    with pytest.raises(EngineError) as caught:
        async with connector:
            await connector.probe()
    return caught.value


async def test_wrong_password_is_a_redacted_connect_failure(harness: Harness) -> None:
    descriptor = harness.loaded.wrong_password
    if descriptor is None:
        pytest.skip(f"{harness.engine.name} has no password authentication here")
    exc = await _connect_error(harness, descriptor)
    assert exc.category is ErrorCategory.CONNECT
    assert exc.message == f"failed to connect to datasource '{harness.ds}'"
    assert exc.detail
    _assert_redacted(harness, exc)


async def test_unreachable_server_is_a_prompt_connect_failure(harness: Harness) -> None:
    descriptor = harness.loaded.unreachable
    if descriptor is None:
        pytest.skip(f"{harness.engine.name} has no unreachable target")
    started = time.monotonic()
    exc = await _connect_error(harness, descriptor)
    assert time.monotonic() - started < 12, "connect gives up within the §11.1 10 s"
    assert exc.category is ErrorCategory.CONNECT
    assert exc.message == f"failed to connect to datasource '{harness.ds}'"
    _assert_redacted(harness, exc)


async def _drain(h: Harness, query: TableQuery) -> None:
    async with h.connector() as connector:
        async for _ in connector.stream(query):
            pass


async def test_query_failure_is_unavailable(harness: Harness) -> None:
    schema = harness.loaded.default_schema
    if schema is None:
        pytest.skip("collections are created on demand: a missing one reads as empty")
    table = TableSchema(
        schema=schema,
        name=harness.engine.catalog_name("contract_missing"),
        columns=(Column(harness.engine.catalog_name("id"), TypeFamily.INTEGER),),
    )
    with pytest.raises(EngineError) as caught:
        await _drain(harness, TableQuery(table, table.columns))
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.message == f"failed to query datasource '{harness.ds}'"
    _assert_redacted(harness, caught.value)
