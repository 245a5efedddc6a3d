"""Peak RSS and throughput of a real Worker extracting 1 M MariaDB rows (issue 13).

Starts a Manager and a Worker (``fetcher run``) against the machine's PostgreSQL (metadata),
RabbitMQ and the loopback S3 server (:class:`bench.support.FetcherProcesses`), creates a
scratch MariaDB database with ``FETCHER_BENCH_MARIADB_ROWS`` (default 1 000 000) rows of mixed
types (int, varchar, decimal, datetime(6), date, json) and a reader with a password, runs one
job over every column and reads the Worker's peak resident set (``VmHWM``, reset just before
the job). The job must complete with every row and the Worker's peak RSS must stay under
150 MiB; rows/s is the row count over the job's own time (``completedAt − createdAt``).
Run: ``.venv/bin/python -m bench.mariadb_memory``.
"""

from __future__ import annotations

import os

from bench.support import FetcherProcesses, create_mariadb, drop_mariadb, vm_hwm_mib

ROWS = int(os.environ.get("FETCHER_BENCH_MARIADB_ROWS", "1000000"))
BOUND_MIB = 150

#: About 170 bytes of JSON per row: 1 M rows stay under the default 256 MiB result limit.
_SOURCE = """
CREATE TABLE ledger (
    id INT PRIMARY KEY, memo VARCHAR(40), amount DECIMAL(12, 2), booked_at DATETIME(6),
    day DATE, doc JSON
);
SET SESSION max_recursive_iterations = 100000000;
INSERT INTO ledger
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < {rows})
SELECT n, MD5(n), (n * 37 % 100000) / 100,
       TIMESTAMPADD(MICROSECOND, n * 1000, '2026-01-01 00:00:00'),
       DATE_ADD('2000-01-01', INTERVAL n % 9000 DAY), JSON_OBJECT('n', n)
FROM seq;
"""


def main() -> int:
    database, reader, password = create_mariadb(_SOURCE.format(rows=ROWS))
    try:
        with FetcherProcesses("worker") as processes:
            idle = vm_hwm_mib(processes.worker_pid)
            processes.connect_mysql("bench_maria", database, reader, password)
            figure = processes.job({"bench_maria": {"ledger": ["*"]}}, None)
    finally:
        drop_mariadb(database, reader)
    if figure.status != "completed" or figure.rows != ROWS:
        raise SystemExit(f"job {figure.status} with {figure.rows} rows: {figure.error}")
    verdict = "OK" if figure.peak_rss_mib < BOUND_MIB else "OVER THE BOUND"
    print(
        f"mariadb worker: {ROWS:,} rows, result {figure.size / 2**20:.1f} MiB in "
        f"{figure.seconds:.1f}s = {ROWS / figure.seconds:,.0f} rows/s; peak RSS "
        f"{figure.peak_rss_mib:.1f} MiB (idle baseline {idle:.1f} MiB; bound {BOUND_MIB} MiB: "
        f"{verdict})"
    )
    return 0 if figure.peak_rss_mib < BOUND_MIB else 1


if __name__ == "__main__":
    raise SystemExit(main())
