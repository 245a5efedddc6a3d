"""§8.7 redaction of 64 KiB hostile texts (§13 "Redaction cost"): each must take < 50 ms.

Every shape is one a hostile database server can put in its error text. The table's original
regexes took seconds on some of them (20k characters of ``a.`` took 4.4 s), quadratic in the
length. The redactor knows step-1 values here (a password, a host and its addresses), as it
does for a connection test, so step 1 runs over the whole 64 KiB as in production.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fetcher.crypto import Redactor

SIZE = 64 * 1024
BOUND_MS = 50.0
ROUNDS = 5


def _fill(unit: str, head: str = "", tail: str = "") -> str:
    body = unit * ((SIZE - len(head) - len(tail)) // len(unit) + 1)
    return (head + body)[: SIZE - len(tail)] + tail


SHAPES: dict[str, Callable[[], str]] = {
    "a.a.a. (step 2/9 word boundaries)": lambda: _fill("a."),
    "a:1a:1 (step 3/9 colons)": lambda: _fill("a:1"),
    "x@y:z@ (step 3 userinfo)": lambda: _fill("x@y:z@"),
    "colons before one @ (step 3)": lambda: _fill(":." * 2040 + "@h "),
    "1://1:// (step 2 separators)": lambda: _fill("1://"),
    "long dotted hostname:port": lambda: _fill("a-b.", tail="c:5432"),
    "dotted labels, no port": lambda: _fill("ab.cd-"),
    "hyphen run a-a-a-": lambda: _fill("a-"),
    "password=password=…": lambda: _fill("password="),
    "long bracketed IPv6": lambda: _fill("0:", head="[", tail="]:5432"),
    "bracket colon run, unclosed": lambda: _fill(":", head="["),
    "scheme run, no ://": lambda: _fill("a+b.c-", tail=":/"),
    "host verbs, open quotes": lambda: _fill('host "x '),
    "password=' keys, open quotes": lambda: _fill("password='x "),
    "Addr: chain": lambda: _fill("Addr:"),
    "address tuples, open": lambda: _fill("('"),
    "IPv4 digits with long port": lambda: _fill("9", head="1.2.3.4:"),
    "IPv6 tokens": lambda: _fill("fe80::1%eth0 "),
    "whitespace": lambda: _fill(" \t"),
    "step-1 secret overlapping itself": lambda: _fill("s"),
    "step-1 host with ports": lambda: _fill("db.internal:5432 "),
}

REDACTOR = Redactor(secrets=["ssss", "hunter22"], hosts=["db.internal", "10.0.0.5", "fd00::5"])


def measure(text: str) -> float:
    """The best of :data:`ROUNDS` redactions of ``text``, in milliseconds."""
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        REDACTOR.redact(text)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main() -> int:
    print(f"redaction of {SIZE // 1024} KiB texts (bound {BOUND_MS:.0f} ms, best of {ROUNDS})")
    slowest = 0.0
    for name, build in SHAPES.items():
        text = build()
        ms = measure(text)
        slowest = max(slowest, ms)
        verdict = "ok" if ms < BOUND_MS else "OVER"
        print(f"  {name:<36} {len(text):>6} chars {ms:8.2f} ms  {verdict}")
    print(f"  slowest {slowest:.2f} ms")
    return 0 if slowest < BOUND_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
