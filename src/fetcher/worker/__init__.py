"""fetcher.worker."""
