"""The §5.4 streaming writer against ``json.dumps`` of the same rows (baseline, same run)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

from fetcher.engine.document import DatasourceWriter
from fetcher.engine.spool import MemorySpool

ROWS = 200_000


def _rows() -> list[dict[str, object]]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        {
            "id": i,
            "account": f"ACC-{i % 977:05d}",
            "amount": f"{(i * 37) % 100000 / 100:.2f}",
            "booked_at": (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "memo": None if i % 5 else f'memo "{i}" café',
            "ratio": i / 7,
        }
        for i in range(ROWS)
    ]


async def _stream(rows: list[dict[str, object]]) -> int:
    spool = MemorySpool()
    writer = DatasourceWriter(spool)
    await writer.open_table("ledger")
    for start in range(0, len(rows), 10_000):
        await writer.write_rows(rows[start : start + 10_000])
    await writer.close_table()
    await writer.close()
    return spool.size


def main() -> None:
    rows = _rows()
    begin = time.perf_counter()
    baseline = len(json.dumps({"ledger": rows}, indent=2, sort_keys=True, ensure_ascii=False))
    baseline_s = time.perf_counter() - begin
    begin = time.perf_counter()
    size = asyncio.run(_stream(rows))
    stream_s = time.perf_counter() - begin
    print(
        f"writer: {ROWS} rows, {size / 2**20:.1f} MiB — "
        f"streaming {size / stream_s / 2**20:.1f} MiB/s, "
        f"json.dumps baseline {baseline / baseline_s / 2**20:.1f} MiB/s, "
        f"ratio {stream_s / baseline_s:.2f}x the baseline's time"
    )
