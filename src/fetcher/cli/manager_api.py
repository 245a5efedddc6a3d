"""Where the client commands (``jobs list``, ``result get <jobId>``) find the Manager.

``--api URL``, else ``FETCHER_API_URL``, else :data:`DEFAULT_API_URL`: the address a local
``fetcher run`` (manager or embedded) listens on by default (``SERVER_ADDRESS`` ``:4006``), so
a local process needs no option at all.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DEFAULT_API_URL", "api_url"]

DEFAULT_API_URL = "http://127.0.0.1:4006"


def api_url(option: str | None, env: Mapping[str, str]) -> str:
    """The Manager's base URL (module docstring)."""
    return option or env.get("FETCHER_API_URL", "").strip() or DEFAULT_API_URL
