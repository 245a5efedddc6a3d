"""§12.4 and §12.5 at the service level: the connection, job and feed use cases called with
Principals directly (the composition bootstrap builds, over SQLite and fakes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.bootstrap import Messaging, Runtime, assemble_runtime
from fetcher.engine.testing import FakeDatabase, FakeRegistry
from fetcher.services.access import product_not_allowed, require_product, require_unrestricted
from fetcher.services.connections.catalog import ListRequest
from fetcher.services.errors import ApiError
from fetcher.services.principal import ANONYMOUS, Principal, Scope
from fetcher.services.testing import RecordingPublisher
from fetcher.settings import Settings

ENV = {"FETCHER_MODE": "embedded", "APP_ENC_KEY": "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="}
ADMIN = frozenset({Scope.ADMIN.value})
ACME = Principal(sub="alice", scopes=ADMIN, tenant="acme")
ACME_PAY = Principal(sub="pat", scopes=ADMIN, products=frozenset({"payments"}), tenant="acme")
GLOBEX = Principal(sub="gary", scopes=ADMIN, tenant="globex")
BODY = {
    "configName": "pg_main",
    "type": "POSTGRESQL",
    "host": "db.example.com",
    "port": 5432,
    "databaseName": "ledger",
    "userName": "reader",
    "password": "s3cret-pass",
}


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = Settings.from_env({**ENV, "DATABASE_URL": f"sqlite:///{tmp_path / 'm.db'}"})
    async with SqliteMetadataStore(tmp_path / "m.db") as store:
        await store.migrate()
        yield assemble_runtime(
            settings,
            store=store,
            registry=FakeRegistry({"pg_main": FakeDatabase()}),
            messaging=Messaging(work_publisher=RecordingPublisher()),
        )


def code(exc: pytest.ExceptionInfo[ApiError]) -> tuple[str, str]:
    return exc.value.code, exc.value.message


def test_access_rules() -> None:
    require_product(ANONYMOUS, "anything")
    require_unrestricted(ANONYMOUS)
    require_product(ACME_PAY, "payments")
    with pytest.raises(ApiError) as caught:
        require_product(ACME_PAY, "billing")
    assert code(caught) == ("FET-0012", "token is not allowed to act for product 'billing'")
    assert caught.value.title == product_not_allowed("x").title == "Product Not Allowed"
    with pytest.raises(ApiError) as caught:
        require_unrestricted(Principal(products=frozenset()))
    assert code(caught) == (
        "FET-0012",
        "a product-restricted token cannot manage unassigned connections",
    )


async def test_connection_use_cases_with_principals(runtime: Runtime) -> None:
    services = runtime.connections
    editor, catalog = services.editor, services.catalog
    pay = await editor.create(dict(BODY), "payments", principal=ACME)
    bill = await editor.create({**BODY, "configName": "bill"}, "billing", principal=ACME)
    assert (pay.tenant, pay.created_by) == ("acme", "alice")
    with pytest.raises(ApiError) as caught:
        await editor.create({**BODY, "configName": "x"}, "billing", principal=ACME_PAY)
    assert caught.value.code == "FET-0012"
    assert (await services.directory.get(pay.id, ACME_PAY)).id == pay.id
    for who, ident in ((ACME_PAY, bill.id), (GLOBEX, pay.id), (ANONYMOUS, pay.id)):
        with pytest.raises(ApiError) as caught:
            await catalog.describe(ident, who)
        assert caught.value.code == "FET-1001"
    page = await catalog.list_page(ListRequest(), product=None, principal=ACME_PAY)
    items = page["items"]
    assert isinstance(items, list)
    assert [item["id"] for item in items] == [pay.id]
    with pytest.raises(ApiError) as caught:
        await catalog.list_page(ListRequest(), product=None, principal=ACME_PAY, unassigned=True)
    assert caught.value.code == "FET-0012"
    with pytest.raises(ApiError) as caught:
        await editor.assign(pay.id, "payments", principal=ACME_PAY)
    assert caught.value.code == "FET-0012"
    with pytest.raises(ApiError) as caught:
        await editor.delete(pay.id, principal=GLOBEX)
    assert caught.value.code == "FET-1001"
    await editor.delete(pay.id, principal=ACME_PAY)


async def test_job_and_feed_use_cases_with_principals(runtime: Runtime) -> None:
    await runtime.connections.editor.create(dict(BODY), "payments", principal=ACME)
    body = {
        "dataRequest": {"mappedFields": {"pg_main": {"accounts": ["id"]}}},
        "metadata": {"source": "payments"},
    }
    with pytest.raises(ApiError) as caught:
        await runtime.jobs.create(
            {**body, "metadata": {"source": "billing"}}, request_id="r", principal=ACME_PAY
        )
    assert caught.value.code == "FET-0012"
    accepted, created = await runtime.jobs.create(body, request_id="r", principal=ACME_PAY)
    assert created
    job_id = str(accepted["jobId"])
    assert (await runtime.jobs.get(job_id, principal=ACME))["createdBy"] == "pat"
    for who in (GLOBEX, ANONYMOUS, Principal(scopes=ADMIN, products=frozenset(), tenant="acme")):
        with pytest.raises(ApiError) as caught:
            await runtime.jobs.get(job_id, principal=who)
        assert caught.value.code == "FET-1001"
        with pytest.raises(ApiError) as caught:  # §14.2: the download answers as the job
            await runtime.downloads.locate(job_id, principal=who)
        assert caught.value.code == "FET-1001"
    with pytest.raises(ApiError) as caught:
        await runtime.downloads.locate(job_id, principal=ACME)
    assert code(caught) == ("FET-1100", "the job has no result: it is pending")
    page = await runtime.feed.read(tenant="acme", products=frozenset({"payments"}))
    assert page.rows == []  # no terminal event yet
