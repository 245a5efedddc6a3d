"""fetcher.adapters.store."""
