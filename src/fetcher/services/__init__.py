"""fetcher.services."""
