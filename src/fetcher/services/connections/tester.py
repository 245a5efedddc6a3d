"""The live connection test (contract §2.6.7) and the live test of job creation (§3.6 step 14b).

:class:`ConnectionTester` rate-limits the test route per tenant (§12.5), resolves the target,
connects and probes within 10 s. A connect failure is a ``failure`` result (its detail logged
redacted), never an error; an SSRF-blocked host is ``400 FET-0414``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from fetcher.engine import EngineError
from fetcher.services.api.response_models import TestResult, shape
from fetcher.services.connections.dialer import (
    CONNECT_TIMEOUT_SECONDS,
    ConnectFailed,
    ConnectionDialer,
)
from fetcher.services.connections.directory import ConnectionDirectory, Target
from fetcher.services.connections.rate_limit import ConnectionTestLimiter
from fetcher.services.principal import Principal
from fetcher.services.records import ConnectionRecord

__all__ = ["TEST_FAILURE_MESSAGE", "ConnectionTester"]

TEST_FAILURE_MESSAGE = (
    "The adapter failed to connect to the target data source. Check credentials and network access."
)


@dataclass
class ConnectionTester:
    directory: ConnectionDirectory
    dialer: ConnectionDialer
    limiter: ConnectionTestLimiter = field(default_factory=ConnectionTestLimiter)

    async def test(self, connection_id: str, *, principal: Principal) -> dict[str, object]:
        """§2.6.7 steps 2–5: rate limit (the tenant's buckets, §12.5), resolution, SSRF
        pre-dial, connect and probe."""
        self.limiter.admit(connection_id, tenant=principal.tenant)
        target = await self.directory.resolve(connection_id, principal)
        started = time.monotonic()
        ok = await self._probe_target(target)
        latency = int((time.monotonic() - started) * 1000)
        message = "Connection successful" if ok else TEST_FAILURE_MESSAGE
        status = "success" if ok else "failure"
        return shape(TestResult, {"status": status, "message": message, "latencyMs": latency})

    async def probe(self, record: ConnectionRecord) -> bool:
        """A live test of a stored connection (§3.6 step 14b): ``False`` on a connect failure.

        Raises ``400 FET-0414`` when the SSRF pre-dial blocks the host.
        """
        return await self._probe_target(Target.stored(record))

    async def _probe_target(self, target: Target) -> bool:
        dialer = self.dialer
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                descriptor = await dialer.prepare(target)
                async with dialer.session(descriptor) as connector:
                    await connector.probe()
        except (ConnectFailed, EngineError, TimeoutError, OSError) as exc:
            await dialer.log_failure("connection test failed", target, exc)
            return False
        return True
