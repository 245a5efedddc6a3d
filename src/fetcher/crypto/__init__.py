"""fetcher.crypto."""
