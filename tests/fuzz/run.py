"""``make fuzz``'s driver: each fuzz target of ``tests/fuzz/targets.py`` in a child process
under the sanitizers for ``--seconds``, then one line per target: executions, the C edges
covered out of all edges in the sanitized extension, CPU seconds (the child's user + system
time), and the findings. Exits non-zero when a child found a difference or a sanitizer fired
(its input is then in ``<work>/findings/``, with the child's report above).

The caller (``scripts/fuzz.sh``) sets the environment: ``LD_PRELOAD`` (the ASan runtime with
libFuzzer), ``PYTHONPATH`` (``tests/fuzz/preload``), ``FETCHER_FUZZ_NATIVE`` (the sanitized
module). Corpora grow in ``<work>/corpus/<target>`` from the committed seeds
(``tests/fuzz/seeds/<target>``).
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_SEEDS = Path(__file__).resolve().parent / "seeds"
_TOTAL = re.compile(r"Loaded 1 modules\s+\((\d+) inline 8-bit counters\)")
_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)", re.MULTILINE)


@dataclass(frozen=True)
class Outcome:
    target: str
    runs: int
    covered: int
    edges: int
    features: int
    cpu_seconds: float
    returncode: int

    def line(self) -> str:
        share = 100 * self.covered / self.edges if self.edges else 0.0
        found = "none" if self.returncode == 0 else f"FOUND (exit {self.returncode})"
        return (
            f"fuzz {self.target}: {self.runs} executions, C edges {self.covered}/{self.edges} "
            f"({share:.1f} %), {self.features} features, CPU {self.cpu_seconds:.1f} s, "
            f"findings: {found}"
        )


def fuzz(target: str, seconds: int, work: Path) -> Outcome:
    corpus = work / "corpus" / target
    corpus.mkdir(parents=True, exist_ok=True)
    findings = work / "findings"
    findings.mkdir(parents=True, exist_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [
            sys.executable, "-m", "tests.fuzz.targets", target,
            f"-max_total_time={seconds}", "-timeout=20", "-rss_limit_mb=4096",
            "-print_final_stats=1", f"-artifact_prefix={findings}/{target}-",
            str(corpus), str(_SEEDS / target),
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log = done.stderr
    (work / f"{target}.log").write_text(log)
    statuses = _STATUS.findall(log)
    runs, covered, features = map(int, statuses[-1]) if statuses else (0, 0, 0)
    total = _TOTAL.search(log)
    if done.returncode != 0:
        sys.stderr.write(log[-12000:])
    return Outcome(
        target,
        runs,
        covered,
        int(total.group(1)) if total else 0,
        features,
        (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        done.returncode,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60, help="per target")
    parser.add_argument("--work", type=Path, required=True, help="corpus, findings and logs")
    parser.add_argument("--targets", default="rows,columns")
    args = parser.parse_args()
    outcomes = [fuzz(target, args.seconds, args.work) for target in args.targets.split(",")]
    for outcome in outcomes:
        print(outcome.line(), flush=True)
    ok = all(o.returncode == 0 and o.runs > 0 and o.edges > 0 for o in outcomes)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
