"""The HTTP API's shapes: every field declared once (shapes) and the response models."""
