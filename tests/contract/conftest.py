"""The contract suite's fixtures: one loaded dataset per engine plugin and session."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

import pytest
import pytest_asyncio

from fetcher.engine import Connector, Engine, ExtractionRequest
from fetcher.engine.filters.parse import parse_filters
from fetcher.engine.testing import MemorySink
from tests.contract.dataset import build_dataset
from tests.contract.engines import ContractEngine, LoadedDataset, discover_engines

pytestmark = pytest.mark.integration

ENGINES = discover_engines()


@pytest.fixture(scope="session", params=ENGINES, ids=lambda engine: engine.name)
def contract_engine(request: pytest.FixtureRequest) -> ContractEngine:
    engine: ContractEngine = request.param
    return engine


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def loaded(contract_engine: ContractEngine) -> AsyncIterator[LoadedDataset]:
    dataset = build_dataset(
        contract_engine.families,
        has_views=contract_engine.has_views,
        adjust=contract_engine.adjust,
    )
    result = await contract_engine.load(dataset)
    try:
        yield result
    finally:
        await contract_engine.unload(result)


@dataclass(frozen=True, slots=True)
class Harness:
    """An engine plugin and its loaded dataset, with the two ways the tests reach them: the
    bare connector (discovery, streaming, errors) and the engine (names, filters, values)."""

    engine: ContractEngine
    loaded: LoadedDataset

    @property
    def ds(self) -> str:
        return self.loaded.descriptor.config_name

    def connector(self, batch_size: int = 2_000) -> Connector:
        return self.engine.registry(self.loaded, batch_size).connector_for(self.loaded.descriptor)

    async def extract(
        self,
        tables: Mapping[str, Sequence[str]],
        filters: Mapping[str, Mapping[str, Mapping[str, list[object]]]] | None = None,
        *,
        batch_size: int = 2_000,
    ) -> dict[str, list[dict[str, object]]]:
        """Run one job over this datasource through ``Engine.run``; the decoded document's
        tables (``{table key: rows}``)."""
        mapped = {self.ds: {key: tuple(fields) for key, fields in tables.items()}}
        raw_filters = {self.ds: filters} if filters else None
        request = ExtractionRequest(
            job_id=f"contract-{secrets.token_hex(4)}",
            mapped_fields=mapped,
            filters=parse_filters(raw_filters, mapped),
        )
        sink = MemorySink()
        engine = Engine(self.engine.registry(self.loaded, batch_size))
        await engine.run(request, {self.ds: self.loaded.descriptor}, sink)
        document: dict[str, dict[str, list[dict[str, object]]]] = json.loads(sink.data)
        assert list(document) == [self.ds]
        return document[self.ds]


@pytest.fixture
def harness(contract_engine: ContractEngine, loaded: LoadedDataset) -> Harness:
    return Harness(contract_engine, loaded)
