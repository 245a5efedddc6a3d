"""The cost of authentication (issue 8): ``GET /v1/fetcher/{id}`` with and without
``AUTH_MODE=jwt`` (RS256 via a JWKS on loopback), on real Manager processes, in one run.

Two Managers (``fetcher run``, PostgreSQL metadata store, RabbitMQ) run side by side, one with
``AUTH_MODE=none`` and one with ``AUTH_MODE=jwt`` whose JWKS is served on loopback by
``tests/fakes/jwks_server.py`` (a 2048-bit RSA key). Each gets a stored connection to a
scratch database and one job; then ``FETCHER_BENCH_AUTH_REQUESTS`` (default 3000) sequential
``GET /v1/fetcher/{id}`` per Manager over a kept-alive connection, the series alternating
request by request in a shuffled order so that machine noise falls on all alike (after 300
warm-up requests each). The jwt client sends the same token every time, as a real client
does until it expires (the Manager then answers from its memory of verified tokens); a third
series sends a new token on every request, so each one pays the whole verification (the
worst case).

Reported: p50/p99 per mode and the difference (goal: ≤ 1 ms added at p50), plus the
in-process cost of one verification (``TokenVerifier.verify``, signature and claims) for
reference. JSON goes to ``bench/results/auth-cost-*.json``.
Run: ``.venv/bin/python -m bench.auth_cost``.
"""

from __future__ import annotations

import asyncio
import os
import random
import secrets
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from tests.fakes.jwks_server import ISSUER, JwksServer, claims, rsa

from bench.support import (
    FETCHER,
    KEY,
    create_postgres,
    delete_broker_objects,
    distributed_env,
    drop_postgres,
    free_port,
    write_report,
)
from fetcher.adapters.auth import KeyRing, TokenVerifier, parse_jwks

REQUESTS = int(os.environ.get("FETCHER_BENCH_AUTH_REQUESTS", "3000"))
WARMUP = 300
GOAL_P50_MS = 1.0
_SOURCE = "CREATE TABLE accounts (id int PRIMARY KEY, email text NOT NULL);"
_PRODUCT = "bench"


@asynccontextmanager
async def manager(name: str, source_db: str, auth: dict[str, str], token: str | None,
                  workdir: Path) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:  # fmt: skip
    """A Manager process with one connection and one job: ``(client, job path)``."""
    suffix = secrets.token_hex(4)
    meta = create_postgres("auth_meta", "SELECT 1")
    port = free_port()
    env = {
        **os.environ, **distributed_env(meta, suffix), **auth, "APP_ENC_KEY": KEY,
        "FETCHER_MODE": "manager", "SERVER_ADDRESS": f"127.0.0.1:{port}",
        "LOG_LEVEL": "warn", "READYZ_DRAIN_DELAY_SEC": "0",
    }  # fmt: skip
    with (workdir / f"{name}.log").open("wb") as log:  # Popen returns at once
        process = subprocess.Popen([FETCHER, "run"], env=env, stdout=log, stderr=log)  # noqa: ASYNC220
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30
        ) as client:
            await _wait_ready(client)
            job_id = await _one_job(client, source_db)
            yield client, f"/v1/fetcher/{job_id}"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        drop_postgres(meta)
        await delete_broker_objects(f"fetcher.bench.{suffix}", f"fetcher.bench.events.{suffix}")


async def _wait_ready(client: httpx.AsyncClient) -> None:
    for _ in range(600):
        try:
            if (await client.get("/readyz")).status_code == 200:  # auth_keys up, with jwt
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError("the Manager never became ready")


async def _one_job(client: httpx.AsyncClient, source_db: str) -> str:
    connection = {
        "configName": "bench_pg", "type": "POSTGRESQL", "host": "127.0.0.1", "port": 5432,
        "databaseName": source_db, "userName": "postgres", "password": "trust-auth",
    }  # fmt: skip
    created = await client.post(
        "/v1/management/connections", json=connection, headers={"X-Product-Name": _PRODUCT}
    )
    created.raise_for_status()
    body = {
        "dataRequest": {"mappedFields": {"bench_pg": {"accounts": ["id", "email"]}}},
        "metadata": {"source": _PRODUCT},
    }
    job = await client.post("/v1/fetcher", json=body)
    job.raise_for_status()
    job_id: str = job.json()["jobId"]
    return job_id


async def _timed_get(client: httpx.AsyncClient, path: str, token: str | None = None) -> float:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    started = time.perf_counter()
    response = await client.get(path, headers=headers)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:200]}")
    return elapsed * 1000


def _percentiles(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50_ms": round(cuts[49], 3), "p99_ms": round(cuts[98], 3)}


def verify_cost(jwks: JwksServer, token: str, rounds: int = 2000) -> dict[str, float]:
    """In-process: one RS256 verification (header, key lookup, signature, claims)."""
    ring: KeyRing = parse_jwks(jwks.document())
    verifier = TokenVerifier(ISSUER, "fetcher", 30, frozenset({"RS256"}))
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        verifier.verify(token, ring)
        samples.append((time.perf_counter() - started) * 1000)
    return _percentiles(samples)


async def run() -> dict[str, Any]:
    key = rsa("bench")
    token = key.sign(claims(scope="fetcher:admin", ttl=3600))
    source_db = create_postgres("auth_src", _SOURCE)
    workdir = Path(tempfile.mkdtemp(prefix="fetcher-bench-auth-"))
    try:
        with JwksServer(key).running() as jwks:
            jwt_env = {"AUTH_MODE": "jwt", "AUTH_ISSUER": ISSUER, "AUTH_JWKS_URL": jwks.url}
            async with AsyncExitStack() as stack:
                none = await stack.enter_async_context(
                    manager("none", source_db, {"AUTH_MODE": "none"}, None, workdir)
                )
                jwt = await stack.enter_async_context(
                    manager("jwt", source_db, jwt_env, token, workdir)
                )
                fresh = [
                    key.sign(claims(scope="fetcher:admin", ttl=3600, jti=str(i)))
                    for i in range(WARMUP + REQUESTS)
                ]
                samples: dict[str, list[float]] = {"none": [], "jwt": [], "fresh": []}
                for i in range(WARMUP + REQUESTS):
                    series: list[tuple[str, tuple[httpx.AsyncClient, str], str | None]] = [
                        ("none", none, None),
                        ("jwt", jwt, None),
                        ("fresh", jwt, fresh[i]),
                    ]
                    random.shuffle(series)  # no series always goes first in a round
                    for name, (client, path), bearer in series:
                        elapsed = await _timed_get(client, path, bearer)
                        if i >= WARMUP:
                            samples[name].append(elapsed)
            verification = verify_cost(jwks, token)
    finally:
        drop_postgres(source_db)
    figures = {name: _percentiles(values) for name, values in samples.items()}
    added = round(figures["jwt"]["p50_ms"] - figures["none"]["p50_ms"], 3)
    return {
        "requests_per_mode": REQUESTS,
        "none": figures["none"],
        "jwt_rs256_jwks": figures["jwt"],
        "jwt_rs256_jwks_new_token_each_request": figures["fresh"],
        "added_p50_ms": added,
        "added_p50_ms_new_token_each_request": round(
            figures["fresh"]["p50_ms"] - figures["none"]["p50_ms"], 3
        ),
        "added_p99_ms": round(figures["jwt"]["p99_ms"] - figures["none"]["p99_ms"], 3),
        "goal_added_p50_ms": GOAL_P50_MS,
        "goal_met": added <= GOAL_P50_MS,
        "verify_in_process": verification,
    }


def main() -> int:
    print(f"auth cost: GET /v1/fetcher/{{id}}, {REQUESTS} requests per mode, alternating")
    result = asyncio.run(run())
    print(f"  AUTH_MODE=none          p50 {result['none']['p50_ms']:7.3f} ms"
          f"  p99 {result['none']['p99_ms']:7.3f} ms")  # fmt: skip
    print(f"  AUTH_MODE=jwt (RS256)   p50 {result['jwt_rs256_jwks']['p50_ms']:7.3f} ms"
          f"  p99 {result['jwt_rs256_jwks']['p99_ms']:7.3f} ms")  # fmt: skip
    fresh = result["jwt_rs256_jwks_new_token_each_request"]
    print(f"  jwt, new token each     p50 {fresh['p50_ms']:7.3f} ms  p99 {fresh['p99_ms']:7.3f} ms"
          f"  (added at p50 {result['added_p50_ms_new_token_each_request']:.3f} ms)")  # fmt: skip
    verdict = "met" if result["goal_met"] else "MISSED"
    print(f"  added at p50 {result['added_p50_ms']:.3f} ms (goal <= {GOAL_P50_MS} ms: {verdict}),"
          f" at p99 {result['added_p99_ms']:.3f} ms")  # fmt: skip
    verify = result["verify_in_process"]
    print(f"  one verification in process: p50 {verify['p50_ms']:.3f} ms,"
          f" p99 {verify['p99_ms']:.3f} ms")  # fmt: skip
    write_report("auth-cost", result)
    return 0 if result["goal_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
