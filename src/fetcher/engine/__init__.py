"""The Fetcher engine (contract §1.4)."""
