"""The C layout of row JSON texts against the Python path on the same texts (issue 23).

The PostgreSQL fast path has the server print each ledger row as one compact JSON text
(``json_build_object(...)::text``: numerics as text, timestamps already in the §5.3 form,
``jsonb`` embedded as its own text); what remains for Fetcher is to lay those texts out as §5.4
bytes at the rows' depth. This bench times, in batches of ``--batch`` rows (default 2,000):

* ``c-bytes`` / ``c-str``: :func:`fetcher.adapters.jsonlayout.texts.layout_rows` on the texts as
  ``bytes`` and as ``str`` (what psycopg hands over for a text column);
* ``python-orjson``: the Python path today: exact parse of the texts
  (``fetcher.adapters.jsonlayout.fastjson.parse_json_column``: the stdlib C scanner, fractions as
  orjson fragments of their source text) and orjson with the §5.4 options, as
  ``fastjson.encode_rows`` writes rows;
* ``python-engine``: the engine's exact parse (fractions as ``ExactNumber``) and its own writer
  (``_rows_bytes`` of the parsed rows, no orjson), the path taken when orjson declines.

Every contender's bytes are checked equal to ``c-bytes``'s for every batch. Figures are CPU
seconds of this process (``time.process_time``; medians over ``--reps`` alternating runs) and
MB/s of input text per CPU second. The texts come from a scratch PostgreSQL database holding
``bench/extraction.py``'s ledger (``--rows``, default 500,000); ``--synthetic`` builds the same
texts in Python instead (no server). Results go to ``bench/results/json-layout-<time>.json``.

Run: ``PYTHONPATH=src .venv/bin/python bench/json_layout.py [--rows N] [--synthetic]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.reports import write_report
from fetcher.adapters.jsonlayout import texts as json_layout
from fetcher.adapters.jsonlayout.fastjson import _OPTIONS, _default, parse_json_column
from fetcher.engine.document import ROW_DEPTH, _rows_bytes
from fetcher.engine.values import parse_json_column as engine_parse_json_column

#: One row as the fast path's query prints it, keys in sorted order (created_at in UTC, §5.3:
#: fraction without trailing zeros, none when zero).
_ROW_TEXT = """
SELECT json_build_object(
    'amount', amount::text,
    'created_at', regexp_replace(
        to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '\\.?0+$', ''
    ) || 'Z',
    'email', email, 'id', id, 'metadata', metadata, 'status', status)::text
FROM ledger
"""

Layout = Callable[[Sequence[bytes] | Sequence[str]], bytes]


def _postgres_texts(rows: int) -> list[str]:
    """The ledger of ``bench/extraction.py`` in a scratch database, printed row by row."""
    import psycopg

    from bench.extraction import _PG_LEDGER
    from bench.fetcher_processes import create_postgres, drop_postgres
    from bench.worker_memory import ADMIN

    database = create_postgres("jsonfmt", _PG_LEDGER.format(rows=rows))
    try:
        conninfo = psycopg.conninfo.make_conninfo(ADMIN, dbname=database)
        with psycopg.connect(conninfo) as db:
            return [row[0] for row in db.execute(_ROW_TEXT.encode()).fetchall()]
    finally:
        drop_postgres(database)


def _synthetic_texts(rows: int) -> list[str]:
    """Texts shaped as PostgreSQL prints the ledger's rows (jsonb's own key order and spacing
    inside ``metadata``, none around ``json_build_object``'s members)."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    texts = []
    for g in range(1, rows + 1):
        created = start + timedelta(seconds=g * 37, milliseconds=g % 1000)
        stamp = created.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".") + "Z"
        metadata = (
            "null"
            if g % 10 == 0
            else f'{{"ref": "R-{g}", "tags": ["t{g % 7}", "x"], "score": {(g % 1000) / 8.0:.3f}'
            f', "attempt": {g % 5}, "channel": "{("web", "pos", "api")[g % 3]}"}}'
        )
        texts.append(
            f'{{"amount" : "{(g * 7919) % 10_000_000 / 100:.2f}", "created_at" : "{stamp}", '
            f'"email" : "user{g}@example.com", "id" : "{g:032x}", "metadata" : {metadata}, '
            f'"status" : "{("pending", "settled", "failed", "refunded")[g % 4]}"}}'
        )
    return texts


def _c_layout(batch: Sequence[bytes] | Sequence[str]) -> bytes:
    data = json_layout.layout_rows(batch, ROW_DEPTH)
    if data is None:
        raise RuntimeError("layout_rows declined a ledger batch")
    return data


def _python_orjson(batch: Sequence[bytes] | Sequence[str]) -> bytes:
    """Exact parse, then orjson as ``fastjson.encode_rows`` calls it (rows wrapped in
    ``ROW_DEPTH - 1`` lists, then cut out)."""
    rows: object = parse_json_column(batch, canonical_ints=False)  # type: ignore[arg-type]
    for _ in range(ROW_DEPTH - 1):
        rows = [rows]
    data = orjson.dumps(rows, default=_default, option=_OPTIONS)
    return data[data.index(b"{") : data.rindex(b"}") + 1]


def _python_engine(batch: Sequence[bytes] | Sequence[str]) -> bytes:
    """Exact parse (fractions as ``ExactNumber``), then the engine's writer."""
    rows = engine_parse_json_column(batch, canonical_ints=False)  # type: ignore[arg-type]
    return bytes(_rows_bytes(rows))  # type: ignore[arg-type]


def _time(layout: Layout, batches: Sequence[Sequence[bytes] | Sequence[str]]) -> float:
    started = time.process_time()
    for batch in batches:
        layout(batch)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--synthetic", action="store_true", help="no PostgreSQL: texts in Python")
    args = parser.parse_args()
    if not json_layout.NATIVE:
        raise SystemExit("fetcher.adapters.jsonlayout._native is not built (setup.py build_ext)")

    texts = _synthetic_texts(args.rows) if args.synthetic else _postgres_texts(args.rows)
    encoded = [text.encode() for text in texts]
    size = sum(map(len, encoded))
    str_batches = [texts[i : i + args.batch] for i in range(0, len(texts), args.batch)]
    byte_batches = [encoded[i : i + args.batch] for i in range(0, len(encoded), args.batch)]
    contenders: dict[str, tuple[Layout, Sequence[Sequence[bytes] | Sequence[str]]]] = {
        "c-bytes": (_c_layout, byte_batches),
        "c-str": (_c_layout, str_batches),
        "python-orjson": (_python_orjson, str_batches),
        "python-engine": (_python_engine, str_batches),
    }

    expected = [_c_layout(batch) for batch in byte_batches]
    output = sum(map(len, expected))
    for name, (layout, batches) in contenders.items():  # same bytes, batch by batch
        if list(map(layout, batches)) != expected:
            raise SystemExit(f"{name}: bytes differ from c-bytes")

    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.reps):
        for name, (layout, batches) in contenders.items():
            seconds[name].append(_time(layout, batches))

    figures = {
        name: {
            "cpu_seconds": statistics.median(runs),
            "runs": runs,
            "input_mb_per_cpu_second": size / 1e6 / statistics.median(runs),
        }
        for name, runs in seconds.items()
    }
    result = {
        "rows": len(texts),
        "batch": args.batch,
        "source": "synthetic" if args.synthetic else "postgresql",
        "input_bytes": size,
        "output_bytes": output,
        "figures": figures,
        "same_bytes": True,
    }
    print(f"{len(texts)} rows, {size / 1e6:.1f} MB of row texts -> {output / 1e6:.1f} MB §5.4")
    for name, runs in seconds.items():
        median = statistics.median(runs)
        print(
            f"  {name:14} {median:6.3f} CPU s  {size / 1e6 / median:7.1f} MB/s  "
            f"(runs: {', '.join(f'{run:.3f}' for run in runs)})"
        )
    write_report("json-layout", result)


if __name__ == "__main__":
    main()
