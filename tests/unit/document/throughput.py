"""Hand-run throughput check of the §5.4 writer (not a test).

    .venv/bin/python tests/unit/document/throughput.py [rows]

Encodes realistic rows (ints, text, decimals as text, timestamps, UUIDs, booleans, floats,
NULLs; every 20th row has a parsed JSON column) through ``DatasourceWriter`` into a
``MemorySpool`` in batches of 10,000, and prints MB/s.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from fetcher.engine.document import DatasourceWriter, MemorySpool
from fetcher.engine.ports import Row
from fetcher.engine.values import (
    encode_datetime,
    encode_decimal,
    encode_float,
    encode_uuid,
    parse_json_exact,
)


def _rows(count: int) -> list[Row]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    json_value = parse_json_exact('{"tags": ["a", "b"], "price": 1.10, "qty": 3}')
    rows: list[Row] = []
    for i in range(count):
        row: dict[str, object] = {
            "id": i,
            "customer_name": f"Customer Ñame {i}",
            "email": f"user{i}@example.com",
            "amount": encode_decimal(Decimal(i) / 100),
            "created_at": encode_datetime(start + timedelta(seconds=i, microseconds=i % 1000)),
            "external_id": encode_uuid(uuid.UUID(int=i * 7919)),
            "active": i % 3 == 0,
            "score": encode_float(i / 7),
            "notes": None if i % 2 else 'line one\nline two "quoted"',
            "country": "PT",
        }
        if i % 20 == 0:
            row["attributes"] = json_value
        rows.append(row)
    return rows


async def _run(rows: list[Row]) -> tuple[int, float]:
    spool = MemorySpool()
    writer = DatasourceWriter(spool)
    began = time.perf_counter()
    await writer.open_table("public_orders")
    for start in range(0, len(rows), 10_000):
        await writer.write_rows(rows[start : start + 10_000])
    await writer.close_table()
    await writer.close()
    return spool.size, time.perf_counter() - began


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rows = _rows(count)
    size, seconds = asyncio.run(_run(rows))
    print(f"{count} rows, {size / 1e6:.1f} MB in {seconds:.3f} s: {size / 1e6 / seconds:.1f} MB/s")


if __name__ == "__main__":
    main()
