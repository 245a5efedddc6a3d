"""``GET /v1/fetcher`` (issue 21) through the HTTP app, on BOTH metadata stores.

Every case runs twice: over the SQLite store of embedded mode and over a fresh PostgreSQL
database. ``app.state.authenticator`` maps bearer tokens to principals (as in the §12.4 tests):
unrestricted, product-restricted and another tenant's. Jobs are stored directly, with chosen
creation times, statuses, products and connections, so every filter's answer is known.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from fetcher.adapters.store.job_search import search_statement
from fetcher.adapters.store.postgres import PostgresMetadataStore
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.bootstrap import MetadataStore
from fetcher.manager.app import create_app
from fetcher.services.jobs.listing import MAX_LISTED_DOCUMENT
from fetcher.services.principal import Principal, Scope
from fetcher.services.records import JobRecord, JobStatus
from fetcher.services.store_roles import JobSearchQuery
from fetcher.settings import Settings
from tests.unit.manager.conftest import ENC_KEY, AutoRegistry, FakePublisher, build_runtime
from tests.unit.manager.test_http_rules import assert_error
from tests.unit.manager.test_product_restriction import INTERNAL, FakeAuthenticator

pytestmark = pytest.mark.integration

J = "/v1/fetcher"
T0 = datetime(2026, 3, 1, 0, 0, 0, tzinfo=UTC)
CONN_A = "0190a000-0000-7000-8000-00000000000a"
CONN_B = "0190b000-0000-7000-8000-00000000000b"
ALL = frozenset({Scope.ADMIN.value})
TOKENS = {
    "admin": Principal(sub="admin", scopes=ALL),
    "pay": Principal(sub="pay", scopes=ALL, products=frozenset({"payments"})),
    "none": Principal(sub="none", scopes=ALL, products=frozenset()),
    "two": Principal(sub="two", scopes=ALL, products=frozenset({"payments", "billing"})),
    "acme": Principal(sub="alice", scopes=ALL, tenant="acme"),
    "writer": Principal(sub="w", scopes=frozenset({Scope.JOBS_WRITE.value})),
}
STATUSES: tuple[JobStatus, ...] = ("pending", "processing", "completed", "failed")


@dataclass
class Lister:
    client: httpx.AsyncClient
    store: MetadataStore
    kind: str

    async def get(
        self, who: str = "admin", headers: dict[str, str] | None = None, **q: str
    ) -> httpx.Response:
        auth = {"Authorization": f"Bearer {who}", **(headers or {})}
        return await self.client.get(J, params=q, headers=auth)

    async def ok(self, who: str = "admin", headers: dict[str, str] | None = None, **q: str) -> Any:
        response = await self.get(who, headers, **q)
        assert response.status_code == 200, response.text
        return response.json()

    async def ids(
        self, who: str = "admin", headers: dict[str, str] | None = None, **q: str
    ) -> list[str]:
        """Every matching job ID, following the cursor."""
        seen: list[str] = []
        cursor = None
        while True:
            params = {**q, **({"cursor": cursor} if cursor else {})}
            page = await self.ok(who, headers, **params)
            seen += [item["id"] for item in page["items"]]
            cursor = page["nextCursor"]
            if cursor is None:
                return seen


def job(
    n: int,
    status: JobStatus = "completed",
    *,
    source: str = "payments",
    tenant: str = "",
    connections: dict[str, str] | None = None,
    mapped: dict[str, Any] | None = None,
    filters: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> JobRecord:
    created = T0 + timedelta(hours=n)
    return JobRecord(
        id=f"0190{n:04x}-0000-7000-8000-{n:012x}",
        status=status,
        request_hash=f"{n:064x}",
        mapped_fields_json=json.dumps(mapped or {"pg_main": {"public.t": ["*"]}}),
        metadata_json=json.dumps({"source": source, **(metadata or {})}, ensure_ascii=False),
        filters_json=json.dumps(filters) if filters else None,
        created_at=created,
        updated_at=created,
        connection_ids=connections if connections is not None else {"pg_main": CONN_A},
        dedup_active=status in ("pending", "processing"),
        completed_at=created if status in ("completed", "failed") else None,
        error="boom" if status == "failed" else None,
        tenant=tenant,
    )


#: 24 jobs of tenant "": statuses in turn, product payments (even n) or billing (odd n),
#: connection A (n < 12) or B; n = 20..23 use the internal datasource ledger_ro only.
def seed_jobs() -> list[JobRecord]:
    jobs = []
    for n in range(24):
        if n >= 20:
            conns: dict[str, str] = {}
            mapped = {"ledger_ro": {"public.t": ["*"]}}
        else:
            conns = {"pg_main": CONN_A if n < 12 else CONN_B}
            mapped = None
        jobs.append(
            job(
                n,
                STATUSES[n % 4],
                source="Payments " if n % 2 == 0 else "billing",
                connections=conns,
                mapped=mapped,
            )
        )
    return jobs


def newest_first(jobs: list[JobRecord]) -> list[str]:
    return [j.id for j in sorted(jobs, key=lambda j: (j.created_at, j.id), reverse=True)]


@pytest.fixture(params=["sqlite", "postgres"])
async def lister(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Lister]:
    store: SqliteMetadataStore | PostgresMetadataStore
    if request.param == "sqlite":
        env = {"FETCHER_MODE": "embedded", "DATABASE_URL": f"sqlite:///{tmp_path / 'meta.db'}"}
        store = SqliteMetadataStore(tmp_path / "meta.db")
    else:
        dsn = request.getfixturevalue("metadata_dsn")
        env = {
            "FETCHER_MODE": "manager",
            "DATABASE_URL": "postgresql://fetcher@metadata/fetcher",
            "RABBITMQ_HOST": "rabbit",
        }
        store = PostgresMetadataStore(dsn)
    await store.open()
    try:
        await store.migrate()
        if isinstance(store, PostgresMetadataStore):  # the database is the session's
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute("TRUNCATE connections, jobs, job_datasources, outbox CASCADE")
        settings = Settings.from_env({"APP_ENC_KEY": ENC_KEY, **env})
        runtime = build_runtime(
            settings, store, AutoRegistry(), FakePublisher(), {"ledger_ro": INTERNAL}
        )
        runtime.lifecycle.started.set()
        app = create_app(runtime)
        app.state.authenticator = FakeAuthenticator(TOKENS)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield Lister(client, store, request.param)
    finally:
        await store.close()


async def seed(lister: Lister, jobs: list[JobRecord]) -> None:
    for record in jobs:
        await lister.store.insert_job(record)


# --- filters and pagination ------------------------------------------------------------------


async def test_pages_follow_the_cursor_newest_first(lister: Lister) -> None:
    jobs = seed_jobs()
    await seed(lister, jobs)
    first = await lister.ok()
    assert len(first["items"]) == 20
    assert isinstance(first["nextCursor"], str)
    assert await lister.ids() == newest_first(jobs)
    assert await lister.ids(limit="7") == newest_first(jobs)
    last = await lister.ok(limit="24")
    assert last["nextCursor"] is None
    assert len(last["items"]) == 24
    # The item is the GET /v1/fetcher/{id} shape.
    one = (
        await lister.client.get(f"{J}/{jobs[5].id}", headers={"Authorization": "Bearer admin"})
    ).json()
    assert next(i for i in last["items"] if i["id"] == jobs[5].id) == one


async def test_an_empty_list(lister: Lister) -> None:
    assert await lister.ok() == {"items": [], "nextCursor": None}


async def test_filters(lister: Lister) -> None:
    jobs = seed_jobs()
    await seed(lister, jobs)

    def expect(keep: Any) -> list[str]:
        return newest_first([j for j in jobs if keep(j)])

    assert await lister.ids(status="failed") == expect(lambda j: j.status == "failed")
    assert await lister.ids(status="failed,pending", limit="3") == expect(
        lambda j: j.status in ("failed", "pending")
    )
    assert await lister.ids(connectionId=CONN_B.upper()) == expect(
        lambda j: j.connection_ids.get("pg_main") == CONN_B
    )
    internal_id = INTERNAL.connection_id or ""
    assert await lister.ids(connectionId=internal_id) == newest_first(jobs[20:])
    unknown = "0190ffff-0000-7000-8000-000000000000"
    assert await lister.ids(connectionId=unknown) == []
    # Dates: whole UTC days; date-times: instants (createdTo includes its millisecond).
    day2 = T0 + timedelta(days=1)
    assert await lister.ids(createdFrom="2026-03-01", createdTo="2026-03-01") == expect(
        lambda j: j.created_at < day2
    )
    assert await lister.ids(
        createdFrom="2026-03-01T05:00:00Z", createdTo="2026-03-01T09:00:00.000+00:00"
    ) == expect(lambda j: T0 + timedelta(hours=5) <= j.created_at <= T0 + timedelta(hours=9))
    assert await lister.ids(createdFrom="2026-03-01T07:30:00+02:00") == expect(
        lambda j: j.created_at >= T0 + timedelta(hours=5, minutes=30)
    )
    assert await lister.ids(
        status="completed", connectionId=CONN_A, createdFrom="2026-03-01T03:00:00Z"
    ) == expect(
        lambda j: (
            j.status == "completed"
            and j.connection_ids.get("pg_main") == CONN_A
            and j.created_at >= T0 + timedelta(hours=3)
        )
    )
    # Empty values are absent, as on the connection list.
    assert await lister.ids(status="", connectionId="", limit="") == newest_first(jobs)


async def test_product_header_limits_the_list(lister: Lister) -> None:
    jobs = seed_jobs()
    await seed(lister, jobs)
    payments = newest_first([j for j in jobs if "payments" in j.metadata_json.lower()])
    assert await lister.ids(headers={"X-Product-Name": " PAYMENTS "}) == payments
    assert await lister.ids(headers={"X-Product-Name": "nobody"}) == []
    body = assert_error(await lister.get(headers={"X-Product-Name": "a b"}), 400, "FET-0403")
    assert body["message"].startswith("X-Product-Name can only contain")
    assert_error(await lister.get(headers={"X-Product-Name": "  "}), 400, "FET-0403")


async def test_large_documents_are_left_out_and_named(lister: Lister) -> None:
    fields = [f"c{i:05d}" for i in range(MAX_LISTED_DOCUMENT // 8)]
    big = job(1, mapped={"pg_main": {"public.t": fields}})
    big_filters = job(2, filters={"pg_main": {"public.t": {"x": {"in": list(range(2000))}}}})
    small = job(3)
    await seed(lister, [big, big_filters, small])
    items = {i["id"]: i for i in (await lister.ok())["items"]}
    assert "mappedFields" not in items[big.id]
    assert items[big.id]["truncated"] == ["mappedFields"]
    assert items[big_filters.id]["truncated"] == ["filters"]
    assert "filters" not in items[big_filters.id]
    assert "mappedFields" in items[big_filters.id]
    assert "truncated" not in items[small.id]
    full = await lister.client.get(f"{J}/{big.id}", headers={"Authorization": "Bearer admin"})
    assert full.json()["mappedFields"]["pg_main"]["public.t"] == fields


async def test_large_metadata_is_cut_to_its_source_in_the_store(lister: Lister) -> None:
    """Issue 33: a ``metadata`` text over 4 KiB keeps ``source`` (the job's product: the
    normalized source) and the failure text; 4 KiB exactly is listed whole."""
    values = {f"k{i:03d}": "v" * 1990 for i in range(3)}
    big = job(1, "failed", source=" Payments ", metadata=values)
    whole_text = json.dumps({"source": "payments", "pad": ""})
    pad = MAX_LISTED_DOCUMENT - len(whole_text.encode())
    at_limit = job(2, metadata={"pad": "é" * (pad // 2) + "x" * (pad % 2)})
    assert len(at_limit.metadata_json.encode()) == MAX_LISTED_DOCUMENT
    over = job(3, metadata={"pad": "é" * (pad // 2) + "x" * (pad % 2) + "x"})
    await seed(lister, [big, at_limit, over])
    items = {i["id"]: i for i in (await lister.ok())["items"]}
    assert items[big.id]["metadata"] == {"source": "payments", "error": "boom"}
    assert items[big.id]["truncated"] == ["metadata"]
    assert items[big.id]["mappedFields"] == {"pg_main": {"public.t": ["*"]}}
    assert "truncated" not in items[at_limit.id]
    assert items[at_limit.id]["metadata"] == json.loads(at_limit.metadata_json)
    assert items[over.id]["truncated"] == ["metadata"]
    full = await lister.client.get(f"{J}/{big.id}", headers={"Authorization": "Bearer admin"})
    assert full.json()["metadata"]["k002"] == "v" * 1990


# --- bad parameters ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "code", "named"),
    [
        ({"state": "failed"}, "FET-0405", "state"),
        ({"status": "FAILED"}, "FET-0405", "status"),
        ({"status": "failed, pending"}, "FET-0405", "status"),
        ({"status": "failed,"}, "FET-0405", "status"),
        ({"connectionId": "not-a-uuid"}, "FET-0405", "connectionId"),
        ({"createdFrom": "2026-13-01"}, "FET-0408", "createdFrom"),
        ({"createdFrom": "0000-01-01"}, "FET-0408", "createdFrom"),
        ({"createdTo": "2026-03-01T10:00:00"}, "FET-0408", "createdTo"),
        ({"createdTo": "yesterday"}, "FET-0408", "createdTo"),
        ({"createdFrom": "2026-03-02", "createdTo": "2026-03-01"}, "FET-0409", "createdTo"),
        (
            {"createdFrom": "2026-03-01T10:00:00Z", "createdTo": "2026-03-01T09:59:59.999Z"},
            "FET-0409",
            "createdTo",
        ),
        ({"limit": "0"}, "FET-0405", "limit"),
        ({"limit": "+5"}, "FET-0405", "limit"),
        ({"limit": "101"}, "FET-0406", "limit"),
        ({"cursor": "!!"}, "FET-0405", "cursor"),
    ],
)
async def test_each_bad_parameter(
    lister: Lister, query: dict[str, str], code: str, named: str
) -> None:
    body = assert_error(await lister.get("admin", None, **query), 400, code)
    assert list(body["fields"]) == [named]
    assert body["message"] == body["fields"][named]


async def test_every_bad_parameter_is_named_at_once(lister: Lister) -> None:
    response = await lister.client.get(
        f"{J}?zeta=1&status=done&status=failed&connectionId=x&createdFrom=today&limit=1000&alpha=",
        headers={"Authorization": "Bearer admin"},
    )
    body = assert_error(response, 400, "FET-0405", "Invalid Query Parameter")
    assert list(body["fields"]) == [
        "zeta",
        "status",
        "alpha",
        "connectionId",
        "createdFrom",
        "limit",
    ]
    assert body["fields"]["zeta"] == "zeta is not a parameter of this list"
    assert body["fields"]["status"] == "status must be given once"
    assert body["fields"]["limit"].startswith(
        "The pagination limit exceeds the maximum allowed of 100"
    )
    assert body["message"] == body["fields"]["zeta"]
    long_name = "x" * 300
    body = assert_error(await lister.get("admin", None, **{long_name: "1"}), 400, "FET-0405")
    assert list(body["fields"]) == ["x" * 99 + "…"]


# --- cursors -------------------------------------------------------------------------------


def _flip(text: str, index: int) -> str:
    return text[:index] + ("A" if text[index] != "A" else "B") + text[index + 1 :]


async def test_a_tampered_cursor_is_refused(lister: Lister) -> None:
    await seed(lister, seed_jobs())
    cursor = (await lister.ok(limit="5"))["nextCursor"]
    position = cursor.split(".")[0]
    for bad in (_flip(cursor, 0), _flip(cursor, len(position) + 1), f"{position}.{'A' * 22}"):
        body = assert_error(await lister.get(limit="5", cursor=bad), 400, "FET-0405")
        assert list(body["fields"]) == ["cursor"]
    # The same cursor is fine with another page size.
    assert len((await lister.ok(limit="3", cursor=cursor))["items"]) == 3


async def test_a_cursor_is_bound_to_its_filters_product_and_tenant(lister: Lister) -> None:
    await seed(lister, [*seed_jobs(), *(job(100 + n, tenant="acme") for n in range(5))])
    cursor = (await lister.ok(status="failed", limit="2"))["nextCursor"]
    assert (await lister.ok(status="failed", limit="2", cursor=cursor))["items"]
    for other in (
        {"status": "pending"},
        {"status": "failed,pending"},
        {"status": "failed", "connectionId": CONN_A},
        {"status": "failed", "createdFrom": "2026-03-01"},
        {"status": "failed", "createdTo": "2026-12-31"},
        {},
    ):
        response = await lister.get("admin", None, limit="2", cursor=cursor, **other)
        body = assert_error(response, 400, "FET-0405")
        assert list(body["fields"]) == ["cursor"]
    with_product = {"X-Product-Name": "payments"}
    assert_error(
        await lister.get(headers=with_product, status="failed", cursor=cursor), 400, "FET-0405"
    )
    # Another tenant's cursor, even under the same filters, is refused.
    acme_cursor = (await lister.ok("acme", limit="2"))["nextCursor"]
    assert_error(await lister.get("admin", limit="2", cursor=acme_cursor), 400, "FET-0405")
    admin_cursor = (await lister.ok(limit="2"))["nextCursor"]
    assert_error(await lister.get("acme", limit="2", cursor=admin_cursor), 400, "FET-0405")


# --- auth, restricted tokens and tenants -------------------------------------------------------


async def test_401_and_403_come_before_every_other_check(lister: Lister) -> None:
    bad = {"status": "nope", "limit": "x"}
    response = await lister.client.get(J, params=bad, headers={"X-Product-Name": " "})
    assert_error(response, 401, "FET-0010")
    body = assert_error(await lister.get("writer", {"X-Product-Name": " "}, **bad), 403, "FET-0011")
    assert body["message"] == "token lacks scope fetcher:jobs:read"


async def test_a_restricted_token_sees_only_its_products(lister: Lister) -> None:
    jobs = seed_jobs()
    await seed(lister, jobs)
    payments = newest_first([j for j in jobs if "payments" in j.metadata_json.lower()])
    assert await lister.ids("pay") == payments
    assert await lister.ids("pay", {"X-Product-Name": "payments"}, status="failed") == [
        i for i in newest_first([j for j in jobs if j.status == "failed"]) if i in payments
    ]
    body = assert_error(
        await lister.get("pay", {"X-Product-Name": "billing"}, status="bogus"), 403, "FET-0012"
    )
    assert body["message"] == "token is not allowed to act for product 'billing'"
    assert await lister.ids("none") == []


async def test_two_tenants_see_only_their_own_jobs(lister: Lister) -> None:
    ours = seed_jobs()[:6]
    theirs = [job(200 + n, tenant="acme", connections={"pg_main": CONN_A}) for n in range(4)]
    await seed(lister, [*ours, *theirs])
    assert await lister.ids("admin") == newest_first(ours)
    assert await lister.ids("acme") == newest_first(theirs)
    assert await lister.ids("acme", connectionId=CONN_A) == newest_first(theirs)
    assert await lister.ids("acme", status="failed") == []


# --- the indexes -------------------------------------------------------------------------------


async def test_sqlite_pages_read_an_index_range(tmp_path: Path) -> None:
    """The planner serves a status page (first and deep) from the status index, without a
    sort; the same holds for the plain, product and connection indexes."""
    store = SqliteMetadataStore(tmp_path / "plan.db")
    await store.open()
    await store.migrate()
    await store.close()
    deep = (T0, "0190ffff-0000-7000-8000-000000000000")
    cases = {
        "jobs_tenant_status_listing": JobSearchQuery(
            tenant="", limit=21, statuses=frozenset({"failed"}), after=deep
        ),
        "jobs_tenant_listing": JobSearchQuery(tenant="", limit=21, after=deep),
        "job_connections_listing": JobSearchQuery(
            tenant="", limit=21, connection_id=CONN_A, statuses=frozenset({"failed"}), after=deep
        ),
        "jobs_tenant_product_listing": JobSearchQuery(
            tenant="", limit=21, products=frozenset({"p"})
        ),
    }
    with sqlite3.connect(tmp_path / "plan.db") as conn:
        for index, query in cases.items():
            page = search_statement(query, SqliteMetadataStore.dialect)
            plan = " ".join(
                str(row) for row in conn.execute(f"EXPLAIN QUERY PLAN {page.sql}", page.params)
            )
            assert index in plan, plan
            assert "TEMP B-TREE" not in plan, plan


async def test_sqlite_several_statuses_or_products_read_one_range_each(tmp_path: Path) -> None:
    """Issue 33: ``status IN (a, b)`` would walk the tenant's whole listing index; the page
    is one range of the status (or product) index per value, merged (the only sort is of
    those ≤ limit rows each), never a scan of ``jobs``."""
    store = SqliteMetadataStore(tmp_path / "plan.db")
    await store.open()
    await store.migrate()
    await store.close()
    deep = (T0, "0190ffff-0000-7000-8000-000000000000")
    cases = {
        "jobs_tenant_status_listing": JobSearchQuery(
            tenant="", limit=21, statuses=frozenset({"failed", "pending", "completed"}), after=deep
        ),
        "jobs_tenant_product_listing": JobSearchQuery(
            tenant="", limit=21, products=frozenset({"p", "q"}), statuses=frozenset({"failed"})
        ),
    }
    with sqlite3.connect(tmp_path / "plan.db") as conn:
        for index, query in cases.items():
            page = search_statement(query, SqliteMetadataStore.dialect)
            plan = conn.execute(f"EXPLAIN QUERY PLAN {page.sql}", page.params)
            rows = [str(row[-1]) for row in plan]
            searches = [r for r in rows if r.startswith("SEARCH j ")]
            ranges = len(query.statuses) if len(query.statuses) > 1 else len(query.products or ())
            assert len(searches) == ranges, rows
            assert all(f"USING INDEX {index} " in r for r in searches), rows
            assert not any(r.startswith("SCAN j") for r in rows), rows


async def test_several_statuses_list_the_same_jobs_as_one_by_one(lister: Lister) -> None:
    jobs = seed_jobs()
    await seed(lister, jobs)
    wanted = newest_first([j for j in jobs if j.status in ("failed", "pending")])
    assert await lister.ids(status="failed,pending", limit="3") == wanted
    restricted = newest_first(
        [j for j in jobs if "payments" in j.metadata_json.lower() and j.status != "completed"]
    )
    assert await lister.ids("pay", status="failed,pending,processing", limit="2") == restricted
    both = newest_first([j for j in jobs if j.status == "failed"])
    assert await lister.ids("two", status="failed", limit="2") == both
    assert await lister.ids("two", limit="5") == newest_first(jobs)
