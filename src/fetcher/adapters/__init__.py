"""fetcher.adapters."""
