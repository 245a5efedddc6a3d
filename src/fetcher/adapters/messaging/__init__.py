"""fetcher.adapters.messaging."""
