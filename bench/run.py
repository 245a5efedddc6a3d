"""What ``make bench`` (``python -m bench.run``) runs; each prints ratios against baselines
measured in the same run, because these machines are noisy.

* extraction: issue 12 side by side (``bench/extraction.py``, figures in docs/performance.md):
  the ledger table through ``COPY``, ConnectorX → Polars, Fetcher Worker → S3 and embedded; a
  filtered extraction, MariaDB, and peak Worker RSS at 100 k / 500 k / 1.5 M rows.
* writer: the streaming §5.4 writer against ``json.dumps(indent=2, sort_keys=True)`` of the
  same rows held in memory.
* redaction: §8.7 redaction of 64 KiB hostile texts, each against its 50 ms bound (§13).
* auth_cost: ``GET /v1/fetcher/{id}`` p50/p99 with and without ``AUTH_MODE=jwt`` (RS256 via a
  loopback JWKS) on real Managers (``bench/auth_cost.py``; goal ≤ 1 ms added at p50).
"""

from __future__ import annotations

from bench import auth_cost, extraction, redaction, writer


def main() -> int:
    writer.main()
    extraction.main()
    auth = auth_cost.main()
    return redaction.main() or auth


if __name__ == "__main__":
    raise SystemExit(main())
