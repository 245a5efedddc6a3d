"""The ``/readyz`` report (contract §2.10, §9.3), shared by every host that serves it.

Checks run in parallel, each within a 2 s budget. A check mapped to ``None`` is ``skipped``.
``error`` is present only when a check is down, and is redacted (§8.7). During drain the body
gains ``"draining":{"status":"down","reason":"shutting down"}`` and the report is unhealthy.
The ``fetcher_readyz_check_up`` gauge records 1 or 0 per check that ran.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping

from prometheus_client import Gauge

__all__ = ["CHECK_BUDGET_SECONDS", "ReadinessProbe", "readiness_report"]

CHECK_BUDGET_SECONDS = 2.0
#: A probe returns when up and raises with a reason when down.
ReadinessProbe = Callable[[], Awaitable[None]]


async def _run(probe: ReadinessProbe, redact: Callable[[str], str]) -> dict[str, object]:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(CHECK_BUDGET_SECONDS):
            await probe()
    except TimeoutError:
        error: str | None = "check timed out after 2s"
    except Exception as exc:  # a probe's failure of any kind is "down"
        error = redact(str(exc) or type(exc).__name__)
    else:
        error = None
    latency = int((time.perf_counter() - started) * 1000)
    if error is None:
        return {"status": "up", "latency_ms": latency}
    return {"status": "down", "latency_ms": latency, "error": error}


async def readiness_report(
    checks: Mapping[str, ReadinessProbe | None],
    *,
    draining: bool,
    version: str,
    deployment_mode: str,
    redact: Callable[[str], str],
    gauge: Gauge | None = None,
) -> tuple[int, dict[str, object]]:
    """``(status code, body)`` of ``GET /readyz``."""
    names = list(checks)
    runnable = {n: p for n, p in checks.items() if p is not None}
    outcomes = await asyncio.gather(*(_run(p, redact) for p in runnable.values()))
    results = dict(zip(runnable, outcomes, strict=True))
    body_checks: dict[str, object] = {}
    for name in names:
        result = results.get(name, {"status": "skipped", "latency_ms": 0})
        body_checks[name] = result
        if gauge is not None and name in results:
            gauge.labels(name).set(1 if result["status"] == "up" else 0)
    healthy = all(r["status"] == "up" for r in results.values()) and not draining
    if draining:
        body_checks["draining"] = {"status": "down", "reason": "shutting down"}
    body: dict[str, object] = {
        "status": "healthy" if healthy else "unhealthy",
        "checks": body_checks,
        "version": version,
        "deployment_mode": deployment_mode,
    }
    return (200 if healthy else 503), body
