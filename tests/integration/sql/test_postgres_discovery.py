"""PostgreSQL discovery scope and exclusions (§3.3, §11.1, §11.3, §11.4)."""

from __future__ import annotations

import pytest

from fetcher.adapters.sql.postgres import PostgresConnector
from fetcher.engine.types import DiscoveredSchema, TypeFamily

pytestmark = pytest.mark.integration


def names(schema: DiscoveredSchema) -> list[tuple[str, str]]:
    return [(t.schema, t.name) for t in schema.tables]


async def test_default_schema_tables_and_views(pg: PostgresConnector) -> None:
    found = await pg.discover(["public"])
    assert found.default_schema == "public"
    assert names(found) == [
        ("public", "MixedCase"),
        ("public", "moments"),
        ("public", "numbers"),
        ("public", "people"),
        ("public", "people_names"),
        ("public", "typed"),
    ]


async def test_pg_named_tables_are_excluded(pg: PostgresConnector) -> None:
    found = await pg.discover(["public"])
    assert not [t for t in found.tables if t.name.startswith("pg_")]


async def test_only_requested_schemas_are_returned(pg: PostgresConnector) -> None:
    assert names(await pg.discover(["accounting"])) == [("accounting", "invoices")]
    both = names(await pg.discover(["accounting", "public"]))
    assert ("accounting", "invoices") in both
    assert ("public", "people") in both
    assert not [s for s, _ in both if s not in {"accounting", "public"}]


async def test_schema_names_are_exact(pg: PostgresConnector) -> None:
    assert names(await pg.discover(["Other"])) == [("Other", "hidden")]
    assert names(await pg.discover(["other"])) == []
    assert names(await pg.discover(["nope"])) == []


async def test_system_schemas_are_never_discovered(pg: PostgresConnector) -> None:
    found = await pg.discover(["pg_catalog", "information_schema", "pg_toast"])
    assert found.tables == ()
    assert (await pg.discover([])).tables == ()


async def test_mixed_case_names_keep_catalog_spelling(pg: PostgresConnector) -> None:
    found = await pg.discover(["public"])
    mixed = next(t for t in found.tables if t.name == "MixedCase")
    assert [c.name for c in mixed.columns] == ["Id", "Display Name", "pct%col"]


async def test_view_columns(pg: PostgresConnector) -> None:
    found = await pg.discover(["public"])
    view = next(t for t in found.tables if t.name == "people_names")
    assert [(c.name, c.family) for c in view.columns] == [
        ("id", TypeFamily.INTEGER),
        ("name", TypeFamily.TEXT),
    ]


async def test_families(pg: PostgresConnector) -> None:
    found = await pg.discover(["public"])
    typed = next(t for t in found.tables if t.name == "typed")
    families = {c.name: (c.family, c.native_type) for c in typed.columns}
    assert families["n"] == (TypeFamily.DECIMAL, "numeric")
    assert families["m"] == (TypeFamily.DECIMAL, "money")
    assert families["r"] == (TypeFamily.FLOAT, "real")
    assert families["f8"] == (TypeFamily.FLOAT, "double precision")
    assert families["tz"][0] is TypeFamily.TIMESTAMPTZ
    assert families["ts"][0] is TypeFamily.TIMESTAMP
    assert families["d"][0] is TypeFamily.DATE
    assert families["t"][0] is TypeFamily.TIME
    assert families["ttz"][0] is TypeFamily.TIME
    assert families["j"] == (TypeFamily.JSON, "jsonb")
    assert families["js"] == (TypeFamily.JSON, "json")
    assert families["b"][0] is TypeFamily.BYTES
    assert families["u"][0] is TypeFamily.UUID
    assert families["ia"] == (TypeFamily.ARRAY, "_int4")
    assert families["ea"] == (TypeFamily.ARRAY, "_mood")
    assert families["iv"] == (TypeFamily.OTHER, "interval")
    assert families["e"] == (TypeFamily.TEXT, "mood")
    assert families["flag"][0] is TypeFamily.BOOLEAN
    assert families["big"][0] is TypeFamily.INTEGER
    assert families["ip"] == (TypeFamily.OTHER, "inet")


async def test_named_discovery_is_whole_discovery_cut_to_the_exact_names(
    pg: PostgresConnector,
) -> None:
    """``discover_tables`` (the planner's fast path) holds exactly the tables of the scope that
    carry one of the names, spelled exactly (PostgreSQL catalog matching is exact, §3.3), each
    with the same columns as whole discovery; names that match nothing add nothing."""
    scope = ["accounting", "public", "Other"]
    whole = await pg.discover(scope)
    asked = ["MixedCase", "people_names", "invoices", "hidden", "mixedcase", "nope", "pg_lookalike"]
    named = await pg.discover_tables(scope, asked)
    assert named.default_schema == whole.default_schema
    assert named.tables == tuple(t for t in whole.tables if t.name in asked)
    assert sorted(names(named)) == [
        ("Other", "hidden"),
        ("accounting", "invoices"),
        ("public", "MixedCase"),
        ("public", "people_names"),
    ]
    assert (await pg.discover_tables(["pg_catalog"], ["pg_class"])).tables == ()
    assert (await pg.discover_tables(scope, [])).tables == ()
