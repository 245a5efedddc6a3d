"""What the benchmark scripts share; a script imports it as ``from bench.support import …``
and runs as ``python -m bench.<script>`` from the repository root (no ``sys.path`` edits).

Every name below is public and documented in its module; a new script needs nothing else:

* Servers (:mod:`bench.support.services`): ``ADMIN`` (the PostgreSQL DSN,
  ``FETCHER_BENCH_POSTGRES_DSN``), ``S3_ENDPOINT``/``S3_BUCKET``/``S3_ACCESS_KEY``/
  ``S3_SECRET_KEY`` (the tests' S3 server), ``FETCHER`` (the ``fetcher`` command), ``KEY`` (an
  ``APP_ENC_KEY``), :func:`free_port`, :func:`distributed_env` (a Manager/Worker pair's
  metadata, broker and S3 variables), :func:`bench_prefix`, and the clean-ups
  :func:`delete_s3_prefix` and :func:`delete_broker_objects`.
* Scratch databases (:mod:`bench.support.databases`): :func:`create_postgres` /
  :func:`drop_postgres`, :func:`create_mariadb` / :func:`drop_mariadb` (a reader with a
  password), :func:`admin_address`, :func:`postgres_scalar`, :func:`postmaster_pid`.
* Fetcher processes (:mod:`bench.support.processes`): :class:`FetcherProcesses` (``worker``,
  ``worker_local``, ``manager`` or ``embedded``, as a ``with`` block), whose
  :meth:`~FetcherProcesses.job` runs one job to its end and returns a :class:`JobFigure` (time,
  size, rows, peak RSS, CPU, and a :class:`Meter`'s figures).
* CPU and memory (:mod:`bench.support.sampling`): :func:`cpu_seconds`,
  :func:`tree_cpu_seconds` (a process tree with its reaped children), :class:`CpuMeter` and
  :class:`SessionCpu` (figures over a span), :func:`machine_busy_seconds`, the server PIDs
  (:func:`mariadb_server_pid`, :func:`s3_server_pid`), :func:`vm_hwm_mib`, :func:`reset_peak`,
  :func:`tree_figures`.
* The in-process engine (:mod:`bench.support.engine`): :func:`postgres_descriptor`,
  :func:`mariadb_descriptor`, :class:`NullSink`.
* The ``ledger`` table (:mod:`bench.support.ledger`): ``PG_LEDGER``, ``MARIADB_LEDGER``,
  ``COLUMNS``, ``NARROW``, ``STEP_SECONDS``, :func:`ledger_source`.
* Results (:mod:`bench.support.reports`): :func:`write_report` writes
  ``bench/results/<prefix>-<UTC stamp>.json``. Commit a result only when a page of ``docs/``
  cites it.

A typical script::

    from bench.support import FetcherProcesses, ledger_source, write_report

    with ledger_source("postgres", 10_000) as connect, FetcherProcesses("embedded") as fetcher:
        connect(fetcher)
        figure = fetcher.job({"bench_src": {"ledger": ["id", "amount"]}}, None)
    write_report("my-bench", {"seconds": figure.seconds, "peak_rss_mib": figure.peak_rss_mib})
"""

from bench.support.databases import (
    admin_address,
    create_mariadb,
    create_postgres,
    drop_mariadb,
    drop_postgres,
    postgres_scalar,
    postmaster_pid,
)
from bench.support.engine import NullSink, mariadb_descriptor, postgres_descriptor
from bench.support.ledger import (
    COLUMNS,
    MARIADB_LEDGER,
    NARROW,
    PG_LEDGER,
    STEP_SECONDS,
    ledger_source,
)
from bench.support.processes import FetcherProcesses, JobFigure, Meter
from bench.support.reports import RESULTS, write_report
from bench.support.sampling import (
    CpuMeter,
    SessionCpu,
    cpu_seconds,
    machine_busy_seconds,
    mariadb_server_pid,
    process_tree,
    reset_peak,
    reset_tree_peaks,
    s3_server_pid,
    tree_cpu_seconds,
    tree_figures,
    vm_hwm_mib,
)
from bench.support.services import (
    ADMIN,
    FETCHER,
    KEY,
    S3_ACCESS_KEY,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET_KEY,
    bench_prefix,
    delete_broker_objects,
    delete_s3_prefix,
    distributed_env,
    free_port,
)

__all__ = [
    # servers
    "ADMIN",
    "FETCHER",
    "KEY",
    "S3_ACCESS_KEY",
    "S3_BUCKET",
    "S3_ENDPOINT",
    "S3_SECRET_KEY",
    "bench_prefix",
    "delete_broker_objects",
    "delete_s3_prefix",
    "distributed_env",
    "free_port",
    # scratch databases
    "admin_address",
    "create_mariadb",
    "create_postgres",
    "drop_mariadb",
    "drop_postgres",
    "postgres_scalar",
    "postmaster_pid",
    # Fetcher processes
    "FetcherProcesses",
    "JobFigure",
    "Meter",
    # CPU and memory
    "CpuMeter",
    "SessionCpu",
    "cpu_seconds",
    "machine_busy_seconds",
    "mariadb_server_pid",
    "process_tree",
    "reset_peak",
    "reset_tree_peaks",
    "s3_server_pid",
    "tree_cpu_seconds",
    "tree_figures",
    "vm_hwm_mib",
    # the in-process engine
    "NullSink",
    "mariadb_descriptor",
    "postgres_descriptor",
    # the ledger
    "COLUMNS",
    "MARIADB_LEDGER",
    "NARROW",
    "PG_LEDGER",
    "STEP_SECONDS",
    "ledger_source",
    # results
    "RESULTS",
    "write_report",
]
