"""The master key of a key version, from the server's variables (contract §14.3).

``APP_ENC_KEY`` is the key of ``APP_ENC_KEY_VERSION`` (default ``1``); ``APP_ENC_KEY_PREVIOUS``
is a comma-separated list of ``<version>:<base64 master key>`` entries (§9.1). The commands that
open results of an older version (``derive-key --version``, ``result get``) read them here; the
server reads them in ``fetcher.settings``.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["current_version", "master_key_text"]


def current_version(env: Mapping[str, str]) -> str:
    """``APP_ENC_KEY_VERSION``, default ``1``."""
    return env.get("APP_ENC_KEY_VERSION", "").strip() or "1"


def master_key_text(env: Mapping[str, str], version: str) -> str | None:
    """The base64 master key of ``version`` (not yet validated), or ``None`` when neither
    ``APP_ENC_KEY`` (its version) nor an ``APP_ENC_KEY_PREVIOUS`` entry holds it."""
    if version == current_version(env):
        return env.get("APP_ENC_KEY", "").strip() or None
    for entry in env.get("APP_ENC_KEY_PREVIOUS", "").split(","):
        name, _, key = entry.strip().partition(":")
        if name == version and key.strip():
            return key.strip()
    return None
