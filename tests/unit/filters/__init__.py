"""Unit tests of the filter language (contract §3.4)."""
