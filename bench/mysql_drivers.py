"""asyncmy vs aiomysql on the same MariaDB extraction (issue 13: keep the faster driver).

Creates a fresh database on the local MariaDB (root, empty password, 127.0.0.1:3306) with
``FETCHER_BENCH_MYSQL_ROWS`` (default 200 000) rows of mixed types (int, bigint, decimal,
double, varchar, datetime(6), timestamp, date, json, blob), then streams the whole table through
each driver's unbuffered ``SSCursor`` with ``fetchmany(2000)``, three times each, alternating,
and prints the best rows/s of each. Only the driver is measured (decoding the MySQL text
protocol into Python values), not the §5.3 encoding the connector adds on top, which is the
same code for either driver.

Run: ``.venv/bin/python -m bench.mysql_drivers`` (needs both drivers installed; the project
pins only the winner, so install the other one for the run).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

ROWS = int(os.environ.get("FETCHER_BENCH_MYSQL_ROWS", "200000"))
BATCH = 2_000
SERVER = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}

_CREATE = """
CREATE TABLE bench (
    id INT PRIMARY KEY, big BIGINT, amount DECIMAL(12, 2), ratio DOUBLE, name VARCHAR(64),
    seen DATETIME(6), stamp TIMESTAMP NULL, born DATE, doc JSON, payload BLOB
)
"""
_FILL = """
INSERT INTO bench
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < {rows})
SELECT n, n * 1000003, ROUND(n / 7, 2), n / 3, CONCAT('name ', n),
       TIMESTAMPADD(SECOND, n, '2024-01-01 00:00:00.123456'),
       TIMESTAMPADD(SECOND, n, '2024-01-01 00:00:00'),
       DATE_ADD('2000-01-01', INTERVAL n % 9000 DAY),
       JSON_OBJECT('n', n, 'tags', JSON_ARRAY('a', 'b')), UNHEX(MD5(n))
FROM seq
"""


async def _setup(database: str) -> None:
    import asyncmy

    conn = await asyncmy.connect(**SERVER)
    async with conn.cursor() as cursor:
        await cursor.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
        await cursor.execute(f"USE `{database}`")
        await cursor.execute(_CREATE)
        await cursor.execute("SET SESSION max_recursive_iterations = 100000000")
        await cursor.execute(_FILL.format(rows=ROWS))
        await conn.commit()
    conn.close()


async def _drop(database: str) -> None:
    import asyncmy

    conn = await asyncmy.connect(**SERVER)
    async with conn.cursor() as cursor:
        await cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    conn.close()


async def _asyncmy(database: str) -> int:
    import asyncmy
    from asyncmy.cursors import SSCursor

    conn = await asyncmy.connect(**SERVER, database=database)
    count = 0
    try:
        async with conn.cursor(SSCursor) as cursor:
            await cursor.execute("SELECT * FROM bench")
            while rows := await cursor.fetchmany(BATCH):
                count += len(rows)
    finally:
        conn.close()
    return count


async def _aiomysql(database: str) -> int:
    import aiomysql  # type: ignore[import-not-found, import-untyped, unused-ignore]

    conn = await aiomysql.connect(**SERVER, db=database)
    count = 0
    try:
        async with conn.cursor(aiomysql.SSCursor) as cursor:
            await cursor.execute("SELECT * FROM bench")
            while rows := await cursor.fetchmany(BATCH):
                count += len(rows)
    finally:
        conn.close()
    return count


async def _best(run: Callable[[str], Awaitable[int]], database: str) -> float:
    started = time.perf_counter()
    count = await run(database)
    elapsed = time.perf_counter() - started
    if count != ROWS:
        raise SystemExit(f"{run.__name__} read {count} rows, expected {ROWS}")
    return ROWS / elapsed


async def main() -> None:
    database = f"fetcher_bench_drivers_{secrets.token_hex(4)}"
    results: dict[str, list[float]] = {"asyncmy": [], "aiomysql": []}
    drivers: dict[str, Any] = {"asyncmy": _asyncmy, "aiomysql": _aiomysql}
    try:
        await _setup(database)
        for _ in range(3):
            for name, run in drivers.items():
                results[name].append(await _best(run, database))
    finally:
        await _drop(database)
    for name, speeds in results.items():
        print(
            f"{name:9s} best {max(speeds):>10,.0f} rows/s  (runs: "
            + ", ".join(f"{s:,.0f}" for s in speeds)
            + f"; {ROWS:,} rows, batch {BATCH})"
        )


if __name__ == "__main__":
    asyncio.run(main())
