"""Integration tests of the PostgreSQL connector against the machine's server."""
