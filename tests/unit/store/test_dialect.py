"""The shared ``:name`` statement spelling, rendered for psycopg (``%(name)s``)."""

from __future__ import annotations

import pytest

from fetcher.adapters.store._dialect import pyformat


@pytest.mark.parametrize(
    ("shared", "psycopg"),
    [
        ("SELECT 1 FROM t WHERE id = :id", "SELECT 1 FROM t WHERE id = %(id)s"),
        ("VALUES (:a, :b_2)", "VALUES (%(a)s, %(b_2)s)"),
        # a cast is not a parameter; the parameter after it is
        ("metadata_json::json -> :mk0", "metadata_json::json -> %(mk0)s"),
        ("CAST(:names AS text[])", "CAST(%(names)s AS text[])"),
        # literals are kept; a percent sign is doubled, as psycopg reads it with parameters
        ("x = '10:30' AND y = :y", "x = '10:30' AND y = %(y)s"),
        ("x = 'it''s :no' AND y = :y", "x = 'it''s :no' AND y = %(y)s"),
        ("x LIKE '5%' AND y = :y", "x LIKE '5%%' AND y = %(y)s"),
        ("SELECT 1", "SELECT 1"),
    ],
)
def test_named_parameters_become_pyformat(shared: str, psycopg: str) -> None:
    assert pyformat(shared) == psycopg
