"""fetcher.adapters.sql."""
