"""fetcher.manager."""
