"""What ``fetcher demo --keep`` prints so the client commands work against it (issue 33).

The demo runs under a master key the user may never have seen (a throwaway one when
``APP_ENC_KEY`` is unset) and keeps its objects in a temporary folder. To follow its events,
fetch its results or open them with the consumer kit, a user needs the derived keys (never
the master key: ``FETCHER_EXTERNAL_KEY`` and ``FETCHER_STORAGE_KEY`` are what the commands and
:class:`fetcher.consumer.ConsumerKeys` read), the folder and the address. The throwaway master
key is printed too, labelled as such (it protects nothing but this demo's temporary data);
a master key from ``APP_ENC_KEY`` is never printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fetcher.settings import Settings

__all__ = ["Kept", "kept_instructions"]


@dataclass(frozen=True, slots=True)
class Kept:
    """The master key of a ``--keep`` run and whether the demo generated it."""

    master_key: str
    throwaway: bool

    def __repr__(self) -> str:
        return f"Kept(throwaway={self.throwaway})"


def kept_instructions(kept: Kept, settings: Settings, base: str, workdir: Path, job_id: str) -> str:
    """The text printed once the demo serves: keys, folder and the exact commands."""
    keys = settings.keys
    objects = workdir / "objects"
    if kept.throwaway:
        master = f"throwaway master key (this run only): APP_ENC_KEY={kept.master_key}"
    else:
        master = "master key: APP_ENC_KEY from your environment (not printed)"
    return "\n".join(
        [
            master,
            f"object folder: {objects}",
            "",
            "In another shell (the derived keys, never the master key):",
            f"  export FETCHER_API_URL={base}",
            f"  export FETCHER_EXTERNAL_KEY={keys.external_hmac.hex()}",
            f"  export FETCHER_STORAGE_KEY={keys.storage.hex()}",
            f"  export OBJECT_STORAGE_LOCAL_DIR={objects}",
            "  fetcher jobs list",
            '  fetcher events tail --feed "$FETCHER_API_URL" --from-start --count 1',
            f"  fetcher result get {job_id} -o result.json",
            "",
            "The consumer kit (Python), with the same variables:",
            "  keys = ConsumerKeys.from_hex(external=os.environ['FETCHER_EXTERNAL_KEY'],",
            "                               storage=os.environ['FETCHER_STORAGE_KEY'])",
            "  source = LocalFolderSource(os.environ['OBJECT_STORAGE_LOCAL_DIR'])",
            "",
            f"API docs: {base}/docs   console: {base}/console   event feed: {base}/v1/events",
        ]
    )
