"""SQLite fixture SQL shared by the tests that need a query that never finishes by itself."""

#: A view whose one row needs ~10^12 recursion steps: hours, unless the query is interrupted
#: (the §4.3 deadline, a cancelled job, a closed connection).
SLOW_SQLITE_VIEW = """
CREATE VIEW slow AS
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000000)
SELECT count(*) AS n FROM c
"""
