"""Limits that the HTTP API declares and a use case applies, stated once below both.

The §2.12 event feed: ``limit`` is 1..``MAX_FEED_LIMIT`` (default ``DEFAULT_FEED_LIMIT``) and
``wait`` 0..``MAX_FEED_WAIT`` seconds. The API's shapes (``services/api/shapes.py``) check the
query parameters against them; the feed (``services/events/feed.py``) reads with them. Here, in
the kernel, neither group imports the other.
"""

from __future__ import annotations

__all__ = ["DEFAULT_FEED_LIMIT", "MAX_FEED_LIMIT", "MAX_FEED_WAIT"]

MAX_FEED_LIMIT = 1000
MAX_FEED_WAIT = 30
DEFAULT_FEED_LIMIT = 100
