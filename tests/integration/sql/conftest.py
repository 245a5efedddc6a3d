"""A populated PostgreSQL database for the connector tests (schemas, tables, views, types)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest

from fetcher.adapters.sql.postgres import PostgresConnector
from fetcher.engine.model import ConnectionDescriptor
from fetcher.engine.types import EngineType

SETUP_SQL = r"""
CREATE SCHEMA accounting;
CREATE SCHEMA "Other";
CREATE TYPE mood AS ENUM ('ok', 'sad');

CREATE TABLE public.people (
    id integer PRIMARY KEY,
    name text,
    score numeric(8, 2),
    born date,
    seen timestamptz,
    naive timestamp,
    active boolean,
    tag uuid,
    fee money,
    feeling mood
);
INSERT INTO public.people
SELECT i,
       'person ' || i,
       i * 1.5,
       date '2024-01-01' + i,
       timestamptz '2024-01-01 00:00:00+00' + i * interval '12 hours',
       timestamp '2024-01-01 00:00:00' + i * interval '1 day',
       i % 2 = 0,
       ('00000000-0000-0000-0000-' || lpad(i::text, 12, '0'))::uuid,
       (i * 10)::numeric::money,
       CASE WHEN i % 3 = 0 THEN 'sad' ELSE 'ok' END::mood
FROM generate_series(1, 20) AS i;
INSERT INTO public.people (id, name) VALUES
    (21, NULL), (22, 'O''Brien'), (23, '100%'), (24, 'back\slash'), (25, 'ünïcødé ✓'),
    (26, '''; DROP TABLE people; --'), (27, 'Person 1');

CREATE TABLE public."MixedCase" ("Id" integer, "Display Name" text, "pct%col" integer);
INSERT INTO public."MixedCase" VALUES (1, 'One', 10), (2, 'Two', 20), (3, 'Three', 30);
CREATE VIEW public.people_names AS SELECT id, name FROM public.people;
CREATE TABLE public.pg_lookalike (x integer);
CREATE TABLE public.numbers AS SELECT generate_series(1, 25) AS n;

CREATE TABLE accounting.invoices (id integer, total numeric(12, 2));
CREATE TABLE "Other".hidden (id integer);

CREATE TABLE public.typed (
    id integer,
    n numeric(10, 2), n_nan numeric, n_inf numeric, n_scale numeric(12, 6),
    tz timestamptz, ts timestamp, ts_inf timestamp,
    d date, d_inf date, d_minf date, d_bc date,
    j jsonb, js json,
    b bytea, u uuid,
    ia integer[], ta text[], na numeric[], ea mood[],
    nul text,
    r real, f8 double precision, f8_nan double precision,
    iv interval, iv_neg interval, iv_mixed interval,
    m money, t time, ttz timetz,
    e mood, flag boolean, big bigint, ip inet
);
SET TIME ZONE 'America/New_York';
INSERT INTO public.typed VALUES (
    1,
    1500, 'NaN', 'Infinity', 0.5,
    '2024-01-02 05:04:05.12', '2024-01-02 03:04:05', 'infinity',
    '2024-02-29', 'infinity', '-infinity', '0044-03-15 BC',
    '{"a": 1.50, "b": [1, 2], "c": {"d": null}}', '{"x": 1.0e2, "y": [1.10]}',
    '\x00ff10', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
    '{1,NULL,3}', '{"a b",c,NULL}', '{1.50,NaN}', '{ok,sad}',
    NULL,
    0.1, 0.1, 'NaN',
    '1 year 2 months 3 days 04:05:06.5', '-1 day', '1 month -1 day',
    1500, '04:05:06.5', '04:05:06+05:30',
    'sad', true, 9007199254740993, '10.0.0.1'
);

CREATE TABLE public.moments (
    id integer, tz timestamptz, ts timestamp, d date, tza timestamptz[], tsa timestamp[], note text
);
INSERT INTO public.moments VALUES
    (1, '2024-01-02 03:04:05.123456+00', '2024-01-02 03:04:05.1', '2024-02-29',
     '{"2024-01-02 03:04:05.5+00",infinity,"0044-03-15 10:00:00+00 BC",NULL}',
     '{"2024-01-02 03:04:05",-infinity,"12345-01-01 00:00:00"}', 'a "quoted" note'),
    (2, '2024-01-02 03:04:05.000001+00', '0001-01-01 00:00:00', '0999-12-31', '{}', '{}', NULL),
    (3, 'infinity', '12345-06-07 08:09:10.11', '10000-01-01', NULL, NULL, 'None'),
    (4, '-infinity', '0044-03-15 10:00:00.25 BC', '0044-03-15 BC', NULL, NULL, ''),
    (5, '0044-03-15 10:00:00+00 BC', 'infinity', 'infinity', NULL, NULL, E'tab\there'),
    (6, '10000-01-01 00:00:00+00', '9999-12-31 23:59:59.999999', '-infinity', NULL, NULL, 'x'),
    (7, NULL, NULL, NULL, NULL, NULL, NULL),
    (8, '1900-01-01 00:00:00.1+00', '1970-01-01 00:00:00', '1970-01-01', NULL, NULL, 'y');
"""


@pytest.fixture(scope="session")
def pg_descriptor(postgres_dsn: str) -> ConnectionDescriptor:
    """The connection of the populated test database (set up once per session)."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(SETUP_SQL)
    params = psycopg.conninfo.conninfo_to_dict(postgres_dsn)
    password = params.get("password")
    return ConnectionDescriptor(
        config_name="pg",
        type=EngineType.POSTGRESQL,
        host=str(params.get("host", "127.0.0.1")),
        port=int(str(params.get("port", 5432))),
        database=str(params["dbname"]),
        username=str(params.get("user", "postgres")),
        password=str(password) if password is not None else None,
    )


@pytest.fixture
async def pg(pg_descriptor: ConnectionDescriptor) -> AsyncIterator[PostgresConnector]:
    async with PostgresConnector(pg_descriptor) as connector:
        yield connector
