"""Where a bench script's figures go: one JSON file per run under ``bench/results/``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"


def write_report(prefix: str, report: Any) -> Path:
    """Write ``report`` as ``bench/results/<prefix>-<UTC stamp>.json``, say where, return it."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"{prefix}-{stamp}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {path}", flush=True)
    return path
