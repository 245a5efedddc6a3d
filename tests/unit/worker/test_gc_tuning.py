"""The Worker's collector tuning (issue 12): start-up objects frozen, a higher young threshold,
applied once per process. Run in a child interpreter so the test process keeps its own GC."""

from __future__ import annotations

import json
import subprocess
import sys

from fetcher.worker.main import GC_YOUNG_THRESHOLD

_PROBE = """
import gc, json
from fetcher.worker.main import tune_gc
before = gc.get_threshold()
tune_gc()
first = (gc.get_threshold(), gc.get_freeze_count())
tune_gc()
second = (gc.get_threshold(), gc.get_freeze_count())
print(json.dumps({"before": before, "first": first, "second": second}))
"""


def test_tune_gc_freezes_start_up_objects_and_raises_the_young_threshold_once() -> None:
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script, no shell
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    figures = json.loads(done.stdout)
    before, first, second = figures["before"], figures["first"], figures["second"]
    assert before[0] < GC_YOUNG_THRESHOLD
    (young, middle, old), frozen = first
    assert young == GC_YOUNG_THRESHOLD
    assert [middle, old] == before[1:]  # only the young generation changes
    assert frozen > 1000  # modules, classes and functions imported so far
    assert second == first  # a second call neither freezes again nor changes anything
