"""§2.4–§2.6 connection routes through HTTP (create, get, list, PATCH, DELETE, assign)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from fetcher.engine import ConnectionDescriptor
from fetcher.engine.types import EngineType
from fetcher.services.connections.credentials import CredentialCipher
from fetcher.services.connections.editor import ConnectionEditor
from fetcher.services.connections.internal_datasources import internal_connection_id
from tests.unit.manager.conftest import Harness, HarnessFactory, pg_body
from tests.unit.manager.test_http_rules import assert_error

C = "/v1/management/connections"
JSON = {"Content-Type": "application/json"}
MISSING = (
    "Your request is missing one or more required fields. Please refer to the documentation "
    "to ensure all necessary fields are included in your request."
)
NOT_FOUND = (
    "It was not possible to find the connection entity during the requested flow. "
    "Please review the data provided in the request."
)


def internal_pg(name: str = "ledger_ro") -> ConnectionDescriptor:
    return ConnectionDescriptor(
        config_name=name,
        type=EngineType.POSTGRESQL,
        host="internal.db",
        port=5432,
        database="ledger",
        username="ro",
        password="internal-secret",
        metadata={"team": "core"},
        internal=True,
        connection_id=internal_connection_id(name),
    )


@pytest.fixture
async def hi(make_harness: HarnessFactory) -> Harness:
    """A harness with two internal datasources."""
    return await make_harness(
        internal={"ledger_ro": internal_pg(), "aaa_ro": internal_pg("aaa_ro")}
    )


# --- create (§2.6.1) ------------------------------------------------------------------------


async def test_create_returns_the_connection_response(h: Harness) -> None:
    response = await h.create(pg_body(ssl={"mode": "require"}, metadata={"team": "core"}))
    assert response.status_code == 201
    body = response.json()
    assert list(body) == [
        "id", "productName", "configName", "type", "host", "port", "databaseName", "userName",
        "ssl", "metadata", "internal", "createdAt", "updatedAt",
    ]  # fmt: skip
    assert body["productName"] == "payments"
    assert body["ssl"] == {"mode": "require"}
    assert body["internal"] is False
    assert body["createdAt"] == body["updatedAt"]
    assert uuid.UUID(body["id"]).version == 7
    assert "password" not in response.text


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "X-Product-Name header is required and must not be empty"),
        ("   ", "X-Product-Name header is required and must not be empty"),
        ("x" * 101, "X-Product-Name must not exceed 100 characters"),
        (
            "pay ments",
            "X-Product-Name can only contain alphanumeric characters, underscores, and hyphens",
        ),
    ],
)
async def test_create_header_rules(h: Harness, value: str | None, message: str) -> None:
    headers = {} if value is None else {"X-Product-Name": value}
    response = await h.client.post(C, json=pg_body(), headers=headers)
    assert assert_error(response, 400, "FET-0403", "Invalid header")["message"] == message


async def test_create_header_is_checked_before_the_body(h: Harness) -> None:
    response = await h.client.post(C, content=b"{")
    assert_error(response, 400, "FET-0403")


async def test_create_header_is_normalized(h: Harness) -> None:
    response = await h.create(pg_body(), product="  PayMents ")
    assert response.json()["productName"] == "payments"


async def test_create_unknown_fields_are_fet_0400(h: Harness) -> None:
    response = await h.create(pg_body(productName="x", ssl={"mode": "require", "foo": 1}))
    error = assert_error(response, 400, "FET-0400", "Unexpected Fields in the Request")
    assert error["fields"] == {"productName": "unexpected field", "ssl.foo": "unexpected field"}


async def test_create_missing_fields_are_fet_0402(h: Harness) -> None:
    response = await h.create({"configName": "abc", "type": "POSTGRESQL", "host": " "})
    error = assert_error(response, 400, "FET-0402", "Missing Fields in Request")
    assert error["message"] == MISSING
    assert set(error["fields"]) == {"host", "port", "databaseName", "userName", "password"}
    assert error["fields"]["port"] == "port is a required field"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"port": "5432"}, "port"),
        ({"port": True}, "port"),
        ({"port": 5432.0}, "port"),
        ({"port": 0}, "port"),
        ({"port": 65536}, "port"),
        ({"configName": "ab"}, "configName"),
        ({"configName": "a" * 101}, "configName"),
        ({"configName": "has space"}, "configName"),
        ({"type": "postgresql"}, "type"),
        ({"host": "-bad-.example"}, "host"),
        ({"databaseName": "a;b"}, "databaseName"),
        ({"password": "x" * 1025}, "password"),
        ({"schema": "x" * 129}, "schema"),
        ({"ssl": {"mode": "require", "cert": "-----BEGIN X"}}, "ssl.key"),
    ],
)
async def test_create_invalid_values_are_fet_0001(
    h: Harness, overrides: dict[str, Any], field: str
) -> None:
    error = assert_error(await h.create(pg_body(**overrides)), 400, "FET-0001", "Bad Request")
    assert field in error["fields"]


async def test_create_boundaries_pass(h: Harness) -> None:
    body = pg_body("a" * 100, port=65535, password="p" * 1024, databaseName="d" * 255)
    assert (await h.create(body)).status_code == 201
    assert (await h.create(pg_body("abc", port=1, password="p"))).status_code == 201


async def test_create_bad_ssl_mode_is_fet_0413(h: Harness) -> None:
    error = assert_error(await h.create(pg_body(ssl={"mode": "true"})), 400, "FET-0413")
    assert error["fields"] == {
        "ssl.mode": "ssl.mode must be one of [disable allow prefer require verify-ca verify-full]"
    }


@pytest.mark.parametrize(
    ("metadata", "code"),
    [({"a": {"b": 1}}, "FET-0410"), ({"a": "x" * 2001}, "FET-0411"), ({"k" * 101: 1}, "FET-0412")],
)
async def test_create_metadata_rules(h: Harness, metadata: dict[str, Any], code: str) -> None:
    assert_error(await h.create(pg_body(metadata=metadata)), 400, code)


async def test_create_ssrf_literal_is_fet_0414_only_with_the_guard(
    make_harness: HarnessFactory,
) -> None:
    off = await make_harness()
    assert (await off.create(pg_body(host="127.0.0.1"))).status_code == 201
    on = await make_harness(env={"SSRF_GUARD_ENABLED": "true"})
    for host in ("10.1.2.3", "localhost", "metadata.google.internal", "::1"):
        response = await on.create(pg_body("other_" + str(abs(hash(host)) % 1000), host=host))
        error = assert_error(response, 400, "FET-0414", "Forbidden Host")
        assert error["message"] == "Host is not a valid external database endpoint"
        assert host not in response.text


async def test_create_duplicate_name_is_409(h: Harness) -> None:
    await h.create_ok()
    assert_error(await h.create(pg_body(), product="other"), 409, "FET-1002", "Conflict")


async def test_create_internal_name_is_409(hi: Harness) -> None:
    assert_error(await hi.create(pg_body("ledger_ro")), 409, "FET-1002")


async def test_sqlite_outside_embedded_mode_is_fet_0001(make_harness: HarnessFactory) -> None:
    h = await make_harness(mode="manager")
    body = {"configName": "lite", "type": "SQLITE", "databaseName": "/srv/data/x.db"}
    error = assert_error(await h.create(body), 400, "FET-0001", "Bad Request")
    assert "type" in error["fields"]


async def test_sqlite_disabled_without_allowed_dir(h: Harness) -> None:
    body = {"configName": "lite", "type": "SQLITE", "databaseName": "/srv/data/x.db"}
    error = assert_error(await h.create(body), 400, "FET-0001")
    assert error["fields"]["type"] == "SQLITE connections are disabled"


async def test_sqlite_connection_in_the_allowed_dir(
    make_harness: HarnessFactory, tmp_path: Any
) -> None:
    import sqlite3

    folder = tmp_path / "allowed"
    folder.mkdir()
    path = folder / "data.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (id INTEGER)")
    conn.close()
    h = await make_harness(env={"SQLITE_ALLOWED_DIR": str(folder)})
    body = {"configName": "lite", "type": "SQLITE", "databaseName": str(path)}
    response = await h.create(body)
    assert response.status_code == 201, response.text
    assert {"host", "port", "userName"}.isdisjoint(response.json())
    outside = await h.create(
        {**body, "configName": "lite2", "databaseName": str(tmp_path / "meta.db")}
    )
    error = assert_error(outside, 400, "FET-0001")
    assert error["fields"]["databaseName"] == (
        "databaseName must be a readable SQLite file in the allowed directory"
    )


# --- get (§2.6.4) ---------------------------------------------------------------------------


async def test_get_by_id_any_case(h: Harness) -> None:
    created = await h.create_ok()
    response = await h.client.get(f"{C}/{created['id'].upper()}")
    assert response.json() == created


@pytest.mark.parametrize("raw", ["nope", "1234", f"{uuid.uuid4().hex}", f"{{{uuid.uuid4()}}}"])
async def test_get_invalid_id_is_fet_0404(h: Harness, raw: str) -> None:
    error = assert_error(
        await h.client.get(f"{C}/{raw}"), 400, "FET-0404", "Invalid Path Parameter"
    )
    assert error["message"] == "invalid connection id"


async def test_get_unknown_is_fet_1001(h: Harness) -> None:
    error = assert_error(await h.client.get(f"{C}/{uuid.uuid4()}"), 404, "FET-1001")
    assert error["message"] == NOT_FOUND
    assert error["title"] == "Entity Not Found"


async def test_get_internal_datasource(hi: Harness) -> None:
    ident = internal_connection_id("ledger_ro")
    body = (await hi.client.get(f"{C}/{ident}")).json()
    assert body == {
        "id": ident,
        "configName": "ledger_ro",
        "type": "POSTGRESQL",
        "databaseName": "ledger",
        "userName": "ro",
        "metadata": {"team": "core"},
        "internal": True,
    }


def test_internal_id_vector() -> None:
    assert internal_connection_id("midaz_onboarding") == "d23dda0c-5f1a-5d94-a584-ea056a9fa8c1"


# --- list (§2.6.2, §2.6.3) ------------------------------------------------------------------


async def _names(h: Harness, query: str = "", headers: dict[str, str] | None = None) -> list[str]:
    response = await h.client.get(f"{C}{query}", headers=headers or {})
    assert response.status_code == 200, response.text
    return [item["configName"] for item in response.json()["items"]]


async def test_list_internal_first_then_stored_and_paginated(hi: Harness) -> None:
    for name in ("s_one", "s_two", "s_three"):
        await hi.create_ok(name)
    assert await _names(hi) == ["aaa_ro", "ledger_ro", "s_three", "s_two", "s_one"]
    assert await _names(hi, "?sortOrder=ASC") == [
        "aaa_ro",
        "ledger_ro",
        "s_one",
        "s_two",
        "s_three",
    ]
    page2 = (await hi.client.get(f"{C}?limit=2&page=2")).json()
    assert [i["configName"] for i in page2["items"]] == ["s_three", "s_two"]
    assert (page2["page"], page2["limit"], page2["total"]) == (2, 2, 5)
    assert await _names(hi, "?limit=3&page=1") == ["aaa_ro", "ledger_ro", "s_three"]
    assert await _names(hi, "?limit=3&page=3") == []


async def test_list_with_product_excludes_internal(hi: Harness) -> None:
    await hi.create_ok("s_one")
    await hi.create(pg_body("s_other"), product="other")
    names = await _names(hi, headers={"X-Product-Name": "PAYMENTS"})
    assert names == ["s_one"]


async def test_list_blank_optional_header_is_fet_0403(hi: Harness) -> None:
    response = await hi.client.get(C, headers={"X-Product-Name": " "})
    error = assert_error(response, 400, "FET-0403")
    assert error["message"] == "X-Product-Name header must not be empty or whitespace-only"


async def test_list_type_filter_matches_internal_and_stored(hi: Harness) -> None:
    await hi.create_ok("s_one")
    assert await _names(hi, "?type=postgresql") == ["aaa_ro", "ledger_ro", "s_one"]
    assert await _names(hi, "?type=MYSQL") == []
    assert await _names(hi, "?type=&limit=") == ["aaa_ro", "ledger_ro", "s_one"]


async def test_list_metadata_and_dates_ignore_internal_filters(hi: Harness) -> None:
    await hi.create_ok("s_one", metadata={"team": "core", "tier": 2, "on": True})
    await hi.create_ok("s_two", metadata={"team": "edge"})
    query = "?metadata.team=core&metadata.tier=2&metadata.on=true"
    assert await _names(hi, query) == ["aaa_ro", "ledger_ro", "s_one"]
    assert await _names(hi, "?startDate=2000-01-01&endDate=2000-01-02") == ["aaa_ro", "ledger_ro"]
    assert await _names(hi, "?startDate=2000-01-01") == ["aaa_ro", "ledger_ro", "s_two", "s_one"]


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("limit=0", "FET-0405"),
        ("limit=+5", "FET-0405"),
        ("limit=%205", "FET-0405"),
        ("limit=1_0", "FET-0405"),
        ("limit=1.5", "FET-0405"),
        ("limit=1234567890", "FET-0405"),
        ("page=0", "FET-0405"),
        ("page=abc", "FET-0405"),
        ("page=100000000&limit=100", "FET-0405"),
        ("limit=101", "FET-0406"),
        ("sortOrder=up", "FET-0407"),
        ("startDate=2024-1-01", "FET-0408"),
        ("endDate=2024-02-30", "FET-0408"),
        ("startDate=2024-02-02&endDate=2024-02-01", "FET-0409"),
        (f"metadata.{'k' * 101}=x", "FET-0405"),
        (f"metadata.k={'v' * 257}", "FET-0405"),
    ],
)
async def test_list_query_errors(h: Harness, query: str, code: str) -> None:
    assert_error(await h.client.get(f"{C}?{query}"), 400, code)
    assert_error(await h.client.get(f"{C}/unassigned?{query}"), 400, code)


async def test_list_limit_message_names_the_maximum(make_harness: HarnessFactory) -> None:
    h = await make_harness(env={"MAX_PAGINATION_LIMIT": "5"})
    error = assert_error(await h.client.get(f"{C}?limit=6"), 400, "FET-0406")
    assert error["message"] == (
        "The pagination limit exceeds the maximum allowed of 5 items per page. "
        "Please verify the limit and try again."
    )
    assert (await h.client.get(f"{C}?limit=5")).status_code == 200


async def test_list_boundary_page_times_limit(h: Harness) -> None:
    assert (await h.client.get(f"{C}?page=21474836&limit=100")).status_code == 200
    assert_error(await h.client.get(f"{C}?page=21474837&limit=100"), 400, "FET-0405")


async def test_unassigned_lists_only_connections_without_product(
    hi: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    await hi.create_ok("s_one")
    record = await hi.store.get_connection_by_name("s_one", tenant="")
    assert record is not None
    from dataclasses import replace

    orphan = replace(record, id=str(uuid.uuid4()), config_name="orphan", product_name=None)
    await hi.store.insert_connection(orphan)
    response = await hi.client.get(f"{C}/unassigned", headers={"X-Product-Name": "payments"})
    body = response.json()
    assert [i["configName"] for i in body["items"]] == ["orphan"]
    assert body["total"] == 1
    assert "productName" not in body["items"][0]


# --- PATCH (§2.6.5) -------------------------------------------------------------------------


async def _patch(h: Harness, ident: str, body: object) -> Any:
    return await h.client.patch(f"{C}/{ident}", json=body)


async def test_patch_merges_and_sets_updated_at(h: Harness) -> None:
    created = await h.create_ok(metadata={"a": 1}, ssl={"mode": "require"}, schema="acc")
    response = await _patch(
        h, created["id"], {"host": "db2.example.com", "metadata": {"b": "x"}, "password": "pw2"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["host"] == "db2.example.com"
    assert body["metadata"] == {"b": "x"}
    assert body["ssl"] == {"mode": "require"}
    assert body["schema"] == "acc"
    assert body["createdAt"] == created["createdAt"]
    assert body["productName"] == "payments"
    assert (await h.client.get(f"{C}/{created['id']}")).json() == body


async def test_patch_null_clears_optional_fields(h: Harness) -> None:
    created = await h.create_ok(metadata={"a": 1}, ssl={"mode": "require"}, schema="acc")
    body = (await _patch(h, created["id"], {"ssl": None, "metadata": None, "schema": None})).json()
    assert {"ssl", "metadata", "schema"}.isdisjoint(body)


async def test_patch_null_on_required_field_is_fet_0001(h: Harness) -> None:
    created = await h.create_ok()
    error = assert_error(await _patch(h, created["id"], {"host": None}), 400, "FET-0001")
    assert error["fields"]["host"] == "host cannot be null"


async def test_patch_blank_required_field_is_invalid_not_missing(h: Harness) -> None:
    created = await h.create_ok()
    error = assert_error(await _patch(h, created["id"], {"host": ""}), 400, "FET-0001")
    assert "host" in error["fields"]


@pytest.mark.parametrize("body", [b"{}", b""])
async def test_patch_empty_body(h: Harness, body: bytes) -> None:
    created = await h.create_ok()
    response = await h.client.patch(f"{C}/{created['id']}", content=body, headers=JSON)
    error = assert_error(response, 400, "FET-0001", "Invalid payload")
    assert error["message"] == "empty request body"


async def test_patch_product_name_is_unknown_field(h: Harness) -> None:
    created = await h.create_ok()
    assert_error(await _patch(h, created["id"], {"productName": "x"}), 400, "FET-0400")


async def test_patch_order_path_then_body_then_unknown_then_existence(h: Harness) -> None:
    assert_error(await _patch(h, "bad", {"zzz": 1}), 400, "FET-0404")
    response = await h.client.patch(f"{C}/{uuid.uuid4()}", content=b"{", headers=JSON)
    assert_error(response, 400, "FET-0001")
    assert_error(await _patch(h, str(uuid.uuid4()), {"zzz": 1}), 400, "FET-0400")
    assert_error(await _patch(h, str(uuid.uuid4()), {"host": "x.example"}), 404, "FET-1001")


async def test_patch_internal_is_409(hi: Harness) -> None:
    ident = internal_connection_id("ledger_ro")
    assert_error(await _patch(hi, ident, {"host": "x.example"}), 409, "FET-0004", "Conflict")


async def test_patch_rename_conflict_and_internal_name(hi: Harness) -> None:
    one = await hi.create_ok("s_one")
    await hi.create_ok("s_two")
    assert_error(await _patch(hi, one["id"], {"configName": "s_two"}), 409, "FET-1002")
    assert_error(await _patch(hi, one["id"], {"configName": "ledger_ro"}), 409, "FET-1002")


async def test_patch_ssrf_is_fet_0414(make_harness: HarnessFactory) -> None:
    h = await make_harness(env={"SSRF_GUARD_ENABLED": "true"})
    created = await h.create_ok(host="93.184.216.34")
    body = {"host": "169.254.169.254", "password": "pw2"}  # §2.6.5 step 7a runs before step 8
    assert_error(await _patch(h, created["id"], body), 400, "FET-0414")


async def _stored_password(h: Harness, name: str) -> str | None:
    editor: ConnectionEditor = h.runtime.connections.editor
    record = await h.store.get_connection_by_name(name, tenant="")
    assert record is not None
    assert record.password_encrypted is not None
    return editor.cipher.decrypt(
        record.password_encrypted, record.id, record.encryption_key_version
    )


async def test_patch_reencrypts_password_only_when_sent(h: Harness) -> None:
    created = await h.create_ok()
    before = await h.store.get_connection_by_name("pg_main", tenant="")
    await _patch(h, created["id"], {"userName": "other"})
    kept = await h.store.get_connection_by_name("pg_main", tenant="")
    assert before is not None
    assert kept is not None
    assert kept.password_encrypted == before.password_encrypted
    await _patch(h, created["id"], {"password": "new-password"})
    assert await _stored_password(h, "pg_main") == "new-password"


async def test_patch_ssl_key_kept_unless_ssl_sent(h: Harness) -> None:
    pem = "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n"
    cert = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"
    created = await h.create_ok(ssl={"mode": "require", "cert": cert, "key": pem})
    before = await h.store.get_connection_by_name("pg_main", tenant="")
    await _patch(h, created["id"], {"port": 6543, "password": "pw2"})
    after = await h.store.get_connection_by_name("pg_main", tenant="")
    assert before is not None
    assert after is not None
    assert after.ssl_key_encrypted == before.ssl_key_encrypted
    await _patch(h, created["id"], {"ssl": {"mode": "disable"}, "password": "pw2"})
    cleared = await h.store.get_connection_by_name("pg_main", tenant="")
    assert cleared is not None
    assert cleared.ssl_key_encrypted is None


async def test_patch_rekeys_kept_secrets_when_the_key_version_changes(
    make_harness: HarnessFactory,
) -> None:
    from dataclasses import replace

    h = await make_harness(
        env={
            "APP_ENC_KEY_VERSION": "2",
            "APP_ENC_KEY_PREVIOUS": "1:pLMnE9qqY6cYldlKhnSUXKPsaN/Y9w7DoKPVnQBnJ1w=",
        }
    )
    editor: ConnectionEditor = h.runtime.connections.editor
    old = CredentialCipher("1", editor.cipher.previous["1"])
    pem = "-----BEGIN PRIVATE KEY-----\nk\n-----END PRIVATE KEY-----\n"
    cert = "-----BEGIN CERTIFICATE-----\nc\n-----END CERTIFICATE-----\n"
    created = await h.create_ok(ssl={"mode": "require", "cert": cert, "key": pem})
    record = await h.store.get_connection_by_name("pg_main", tenant="")
    assert record is not None
    legacy = replace(
        record,
        password_encrypted=old.encrypt("old-pass", record.id),
        ssl_key_encrypted=old.encrypt(pem, record.id),
        encryption_key_version="1",
    )
    await h.store.update_connection(legacy)
    await _patch(h, created["id"], {"password": "new-pass"})
    updated = await h.store.get_connection_by_name("pg_main", tenant="")
    assert updated is not None
    assert updated.encryption_key_version == "2"
    assert updated.ssl_key_encrypted is not None
    assert editor.cipher.decrypt(updated.ssl_key_encrypted, record.id, "2") == pem


async def test_patch_type_to_sqlite_clears_credentials(
    make_harness: HarnessFactory, tmp_path: Any
) -> None:
    import sqlite3

    folder = tmp_path / "allowed"
    folder.mkdir()
    path = folder / "d.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER)")
    conn.commit()
    conn.close()
    h = await make_harness(env={"SQLITE_ALLOWED_DIR": str(folder)})
    created = await h.create_ok()
    response = await _patch(h, created["id"], {"type": "SQLITE", "databaseName": str(path)})
    assert response.status_code == 200, response.text
    assert {"host", "port", "userName"}.isdisjoint(response.json())
    record = await h.store.get_connection_by_name("pg_main", tenant="")
    assert record is not None
    assert (record.host, record.port, record.user_name, record.password_encrypted) == (
        None, None, None, None,
    )  # fmt: skip


async def _make_active_job(h: Harness, name: str = "pg_main") -> None:
    body = {
        "dataRequest": {"mappedFields": {name: {"t": ["id"]}}},
        "metadata": {"source": "payments"},
    }
    assert (await h.client.post("/v1/fetcher", json=body)).status_code == 202


async def test_patch_and_delete_with_active_jobs_are_409(h: Harness) -> None:
    created = await h.create_ok()
    await _make_active_job(h)
    error = assert_error(await _patch(h, created["id"], {"port": 1}), 409, "FET-1021")
    assert error["message"] == "cannot update connection with active jobs"
    assert error["title"] == "Job In Progress"
    error = assert_error(await h.client.delete(f"{C}/{created['id']}"), 409, "FET-1021")
    assert error["message"] == "cannot delete connection with active jobs"


async def test_patch_drops_the_schema_cache_entry(h: Harness) -> None:
    from tests.unit.manager.conftest import table

    created = await h.create_ok()
    h.db("pg_main").add(table("public", "accounts", "id"))
    body = {"mappedFields": {"pg_main": {"accounts": ["id"]}}}
    url = f"{C}/validate-schema"
    assert (await h.client.post(url, json=body)).status_code == 200
    assert len(h.runtime.connections.schemas.cache) == 1
    await _patch(h, created["id"], {"configName": "pg_renamed"})
    assert len(h.runtime.connections.schemas.cache) == 0


# --- DELETE (§2.6.6) and assign (§2.6.10) ---------------------------------------------------


async def test_delete_is_soft_and_frees_the_name(h: Harness) -> None:
    created = await h.create_ok()
    response = await h.client.delete(f"{C}/{created['id']}")
    assert response.status_code == 204
    assert response.content == b""
    assert_error(await h.client.get(f"{C}/{created['id']}"), 404, "FET-1001")
    assert_error(await h.client.delete(f"{C}/{created['id']}"), 404, "FET-1001")
    assert (await h.create(pg_body())).status_code == 201


async def test_delete_errors(hi: Harness) -> None:
    assert_error(await hi.client.delete(f"{C}/x"), 400, "FET-0404")
    assert_error(await hi.client.delete(f"{C}/{uuid.uuid4()}"), 404, "FET-1001")
    ident = internal_connection_id("ledger_ro")
    assert_error(await hi.client.delete(f"{C}/{ident}"), 409, "FET-0004")


async def _orphan(h: Harness) -> str:
    from dataclasses import replace

    await h.create_ok("seed")
    record = await h.store.get_connection_by_name("seed", tenant="")
    assert record is not None
    orphan = replace(record, id=str(uuid.uuid4()), config_name="orphan", product_name=None)
    await h.store.insert_connection(orphan)
    return orphan.id


async def test_assign_sets_the_product_once(h: Harness) -> None:
    ident = await _orphan(h)
    url = f"{C}/{ident}/assign"
    response = await h.client.post(url, headers={"X-Product-Name": " Billing "}, content=b"junk")
    assert response.status_code == 200, response.text
    assert response.json()["productName"] == "billing"
    again = await h.client.post(url, headers={"X-Product-Name": "other"})
    error = assert_error(again, 409, "FET-1015", "Connection Already Assigned")
    assert error["message"] == (
        "The connection is already assigned to a product and cannot be reassigned."
    )


async def test_assign_check_order(hi: Harness) -> None:
    assert_error(await hi.client.post(f"{C}/bad/assign"), 400, "FET-0403")
    headers = {"X-Product-Name": "p"}
    assert_error(await hi.client.post(f"{C}/bad/assign", headers=headers), 400, "FET-0404")
    url = f"{C}/{uuid.uuid4()}/assign"
    assert_error(await hi.client.post(url, headers=headers), 404, "FET-1001")
    url = f"{C}/{internal_connection_id('ledger_ro')}/assign"
    assert_error(await hi.client.post(url, headers=headers), 409, "FET-0004")
