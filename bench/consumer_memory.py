"""Peak RSS of a consumer opening a ≥ 100 MiB result with the consumer kit (issue 9).

1. Generates a §5.4 document of about ``FETCHER_BENCH_CONSUMER_MIB`` MiB (default 110; three
   tables, ~200-byte rows), encrypting it as it is written (§6.3 ``ObjectEncryptor``) and
   computing its HMAC, so neither the generator nor the file ever holds it in memory.
2. Stores the object in a local folder, and with ``--s3`` also in a fresh bucket of the
   loopback S3 server (``scripts/s3-server.sh start``).
3. For each source, a **fresh child process** imports the kit, records its ``VmHWM`` (the
   baseline: interpreter + cryptography [+ aioboto3]), then runs ``open_result`` — download,
   GCM tag and HMAC verification into the encrypted spool — and streams every row, counting
   them; it prints the baseline, the peak, the row count and the seconds taken.

The bound: the child's peak RSS stays under 100 MiB. Run:
``.venv/bin/python -m bench.consumer_memory [--s3]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fetcher.consumer import ConsumerKeys
from fetcher.crypto import HmacStream, ObjectEncryptor

MASTER = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
TARGET_MIB = int(os.environ.get("FETCHER_BENCH_CONSUMER_MIB", "110"))
LIMIT_MIB = 100
KEY = "external-data/bench-consumer.json"


def _row(i: int) -> bytes:
    row = {
        "amount": f"{i * 7 % 100000}.{i % 100:02d}",
        "created_at": "2026-01-02T03:04:05.12Z",
        "email": f"user{i}@example.com",
        "id": i,
        "note": "ü" * (i % 13) + "x" * 40,
        "ref": f"6a5b0f8c-2f1e-4a41-9f0e-{i:012d}",
    }
    text = json.dumps(row, indent=2, sort_keys=True, ensure_ascii=False)
    return ("      " + text.replace("\n", "\n      ")).encode()


def generate(path: Path, keys: ConsumerKeys) -> tuple[str, int, int]:
    """Write the encrypted object; return (hmac, plaintext size, rows)."""
    assert keys.storage is not None
    encryptor, mac = ObjectEncryptor(keys.storage), HmacStream(keys.external_hmac)
    size = rows = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:

        def put(data: bytes) -> None:
            nonlocal size
            mac.update(data)
            size += len(data)
            out.write(encryptor.update(data))

        per_table = TARGET_MIB * 1024 * 1024 // 3
        put(b'{\n  "bench": {')
        for t, table in enumerate(("accounts", "entries", "events")):
            put(b"," if t else b"")
            put(f'\n    "{table}": [\n'.encode())
            start = size
            first = True
            while size - start < per_table:
                put((b"" if first else b",\n") + _row(rows))
                rows, first = rows + 1, False
            put(b"\n    ]")
        put(b"\n  }\n}")
        out.write(encryptor.finalize())
    return mac.hexdigest(), size, rows


CHILD = r"""
import asyncio, sys, time
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
from fetcher.consumer import ConsumerKeys, LocalFolderSource, ResultRef, S3Source, open_result
kind, where, key, mac, size = sys.argv[1:6]
if kind == "s3":
    import aioboto3  # counted in the baseline: a real S3 consumer imports it
keys = ConsumerKeys.from_master(sys.argv[6])
base = hwm()
async def run():
    ref = ResultRef(key, mac, size_bytes=int(size))
    if kind == "s3":
        endpoint, bucket, access, secret = where.split("|")
        async with S3Source(bucket, endpoint_url=endpoint, access_key_id=access,
                            secret_access_key=secret) as source:
            return await open_result(ref, source, keys)
    return await open_result(ref, LocalFolderSource(where), keys)
started = time.monotonic()
result = asyncio.run(run())
verified = time.monotonic()
with result:
    rows = sum(1 for _ in result.rows())
print(base, hwm(), rows, f"{verified - started:.1f}", f"{time.monotonic() - verified:.1f}")
"""


def measure(kind: str, where: str, mac: str, size: int) -> list[str]:
    argv = [sys.executable, "-c", CHILD, kind, where, KEY, mac, str(size), MASTER]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=1800)
    return out.stdout.split()


def _upload(path: Path) -> str:
    from tests.services import S3_ACCESS_KEY, S3_ENDPOINT, S3_SECRET_KEY, s3_test_client

    bucket = f"fetcher-bench-consumer-{os.getpid()}"
    with s3_test_client() as client:
        client.create_bucket(Bucket=bucket)
        client.upload_file(str(path), bucket, KEY)
    return "|".join((S3_ENDPOINT, bucket, S3_ACCESS_KEY, S3_SECRET_KEY))


def _drop(where: str) -> None:
    from tests.services import s3_test_client

    bucket = where.split("|")[1]
    with s3_test_client() as client:
        client.delete_object(Bucket=bucket, Key=KEY)
        client.delete_bucket(Bucket=bucket)


def main() -> int:
    keys = ConsumerKeys.from_master(MASTER)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.monotonic()
        mac, size, rows = generate(root / KEY, keys)
        stored = (root / KEY).stat().st_size
        print(
            f"document: {size / 2**20:.1f} MiB plaintext, {rows} rows, "
            f"{stored / 2**20:.1f} MiB stored; generated in {time.monotonic() - started:.0f} s"
        )
        sources = [("local", str(root))]
        if "--s3" in sys.argv:
            sources.append(("s3", _upload(root / KEY)))
        worst = 0
        try:
            for kind, where in sources:
                base, peak, counted, t_open, t_rows = measure(kind, where, mac, size)
                assert int(counted) == rows, (counted, rows)
                worst = max(worst, int(peak))
                print(
                    f"{kind:5s}: baseline {base} MiB, peak RSS {peak} MiB "
                    f"(limit {LIMIT_MIB}); open+verify {t_open} s, {counted} rows in {t_rows} s"
                )
        finally:
            for kind, where in sources:
                if kind == "s3":
                    _drop(where)
    return 0 if worst < LIMIT_MIB else 1


if __name__ == "__main__":
    raise SystemExit(main())
