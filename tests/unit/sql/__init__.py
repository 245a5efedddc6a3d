"""Unit tests of the SQL connectors that need no server (SQLite, PostgreSQL helpers)."""
