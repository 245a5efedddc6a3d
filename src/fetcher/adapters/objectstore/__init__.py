"""fetcher.adapters.objectstore."""
