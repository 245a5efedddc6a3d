"""Running Fetcher processes and scratch databases for the benchmarks (issue 12).

:class:`FetcherProcesses` starts either a Manager and a Worker (``fetcher run``, PostgreSQL
metadata store, RabbitMQ, the loopback SeaweedFS S3 server or a local directory) or one
embedded process (SQLite metadata, local store), each on loopback ports, and stops them by PID.
:meth:`job` submits one job and reports its time (``completedAt − createdAt``), document size
and the extracting process's peak RSS (``VmHWM``, reset through ``/proc/<pid>/clear_refs``
before the job; summed with its child processes', embedded mode's batch encoder) and CPU, and
what a meter (``bench.process_cpu``) measured meanwhile. The Worker's objects go under a prefix
of their own, deleted from the test bucket on exit; a local store's after each job.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

import psycopg

from bench.process_cpu import cpu_seconds, process_tree, tree_cpu_seconds
from bench.worker_memory import (
    ADMIN,
    FETCHER,
    KEY,
    _delete_broker_objects,
    _free_port,
    bench_prefix,
    delete_s3_prefix,
    distributed_env,
)

# cpu_seconds moved to bench.process_cpu; other benches still import it from here.
__all__ = [
    "FetcherProcesses",
    "JobFigure",
    "Meter",
    "cpu_seconds",
    "create_mariadb",
    "create_postgres",
    "drop_mariadb",
    "drop_postgres",
    "postgres_scalar",
    "postmaster_pid",
    "tree_figures",
    "vm_hwm_mib",
]

MARIADB_ROOT = ["mariadb", "-h", "127.0.0.1", "-P", "3306", "-u", "root"]
PRODUCT = "bench"
POLL_SECONDS = 0.1


def create_postgres(prefix: str, sql: str) -> str:
    """A scratch PostgreSQL database holding ``sql``'s objects; returns its name."""
    name = f"fetcher_bench_{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        conninfo = psycopg.conninfo.make_conninfo(ADMIN, dbname=name)
        with psycopg.connect(conninfo, autocommit=True) as db:
            db.execute(sql.encode())
    except BaseException:
        drop_postgres(name)
        raise
    return name


def drop_postgres(name: str) -> None:
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def _admin_address() -> tuple[str, int]:
    """Host and port of the bench's PostgreSQL server (``FETCHER_BENCH_POSTGRES_DSN``)."""
    params = psycopg.conninfo.conninfo_to_dict(ADMIN)
    return str(params.get("host", "127.0.0.1")), int(str(params.get("port", 5432)))


def postmaster_pid() -> int:
    """The PID of the bench's PostgreSQL server (the parent of a backend)."""
    with psycopg.connect(ADMIN, dbname="postgres", autocommit=True) as db:
        row = db.execute(b"SELECT pg_backend_pid()").fetchone()
        assert row is not None
        # read while the backend lives: it exits with this connection
        fields = Path(f"/proc/{row[0]}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])


def postgres_scalar(database: str, sql: str) -> Any:
    with psycopg.connect(ADMIN, dbname=database, autocommit=True) as db:
        row = db.execute(sql.encode()).fetchone()
    return None if row is None else row[0]


def create_mariadb(sql: str) -> tuple[str, str, str]:
    """A scratch MariaDB database with ``sql``'s objects and a reader with a password."""
    name = f"fetcher_bench_{secrets.token_hex(4)}"
    reader, password = f"bench_{secrets.token_hex(4)}", secrets.token_hex(12)
    script = (
        f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4; USE `{name}`; {sql}\n"
        f"CREATE USER '{reader}'@'%' IDENTIFIED BY '{password}';\n"
        f"GRANT SELECT ON `{name}`.* TO '{reader}'@'%';\n"
    )
    try:
        subprocess.run(MARIADB_ROOT, input=script, text=True, check=True, capture_output=True)
    except BaseException:
        drop_mariadb(name, reader)
        raise
    return name, reader, password


def drop_mariadb(name: str, reader: str) -> None:
    script = f"DROP DATABASE IF EXISTS `{name}`; DROP USER IF EXISTS '{reader}'@'%';"
    subprocess.run(MARIADB_ROOT, input=script, text=True, check=False, capture_output=True)


def tree_figures(pid: int) -> tuple[float, float]:
    """Summed ``VmHWM`` (MiB) of :func:`process_tree` (embedded mode's batch encoder process
    and multiprocessing's resource tracker) and the tree's CPU seconds, reaped children
    included (:func:`bench.process_cpu.tree_cpu_seconds`): the peaks of separate processes are
    added, which bounds their peak together from above."""
    peak = 0.0
    for member in process_tree(pid):
        with suppress(OSError, RuntimeError):
            peak += vm_hwm_mib(member)
    return peak, tree_cpu_seconds(pid)


def reset_tree_peaks(pid: int) -> None:
    for member in process_tree(pid):
        with suppress(OSError):
            reset_peak(member)


def vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def reset_peak(pid: int) -> None:
    """``echo 5 > /proc/<pid>/clear_refs``: the peak RSS starts again from the current RSS."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def _request(
    method: str, url: str, body: object = None, headers: dict[str, str] | None = None
) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
        return json.loads(raw) if raw else None


def _seconds_between(created: str, completed: str) -> float:
    begin = datetime.fromisoformat(created.replace("Z", "+00:00"))
    end = datetime.fromisoformat(completed.replace("Z", "+00:00"))
    return (end - begin).total_seconds()


@dataclass
class JobFigure:
    status: str
    seconds: float
    wall_seconds: float
    size: int
    rows: int | None
    peak_rss_mib: float
    error: str | None
    #: CPU seconds (user + system) the extracting process used from submission to the end.
    cpu_seconds: float = 0.0
    #: The figures of the job's ``meter`` (:class:`bench.process_cpu.CpuMeter`) over the same
    #: span: submission to the poll that saw the job end.
    meters: dict[str, float] = field(default_factory=dict)


class Meter(Protocol):
    """What :meth:`FetcherProcesses.job` measures besides the extracting process."""

    def start(self) -> None: ...

    def stop(self) -> dict[str, float]: ...


class FetcherProcesses:
    """``mode`` ``worker`` (Manager + Worker → S3), ``worker_local`` (Manager + Worker → a
    local directory, ``OBJECT_STORAGE_LOCAL_WORKER``: the Worker's own cost, no S3 server),
    ``manager`` (the Manager alone: jobs stay ``pending``, their work messages wait in the
    queue) or ``embedded`` (one process → local store). ``manager_pid`` and ``worker_pid`` (0
    when there is none) name the processes. A local store's objects are deleted after each
    job."""

    def __init__(self, mode: str, *, worker_nice: int = 0, **overrides: str) -> None:
        """``worker_nice`` runs the Worker at that niceness (``nice -n``), a stand-in for a
        Worker on other cores: the Manager's requests then come first on a busy machine."""
        self.mode = mode
        self._worker_nice = worker_nice
        self._local_store = mode in ("embedded", "worker_local")
        self._overrides = overrides
        self._suffix = secrets.token_hex(4)
        self._dir = Path(tempfile.mkdtemp(prefix="fetcher-bench-"))
        self._meta_db: str | None = None
        self._processes: list[subprocess.Popen[bytes]] = []
        self.base = ""
        self.pid = 0
        self.manager_pid = 0
        self.worker_pid = 0

    @property
    def metadata_database(self) -> str:
        """The scratch metadata database of a Manager (empty in embedded mode)."""
        return self._meta_db or ""

    @property
    def metadata_file(self) -> Path:
        """The SQLite metadata store of embedded mode (``meta.db`` in the scratch folder)."""
        return self._dir / "meta.db"

    def _env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "APP_ENC_KEY": KEY,
            "READYZ_DRAIN_DELAY_SEC": "0",
            "LOG_LEVEL": "warn",
            **self._overrides,
        }
        if self.mode == "embedded":
            return {
                **env,
                "FETCHER_MODE": "embedded",
                "DATABASE_URL": f"sqlite:///{self._dir / 'meta.db'}",
                "OBJECT_STORAGE_LOCAL_DIR": str(self._dir / "objects"),
            }
        if self._meta_db is None:
            raise RuntimeError("the metadata database is created in __enter__")
        host, port = _admin_address()  # FETCHER_BENCH_POSTGRES_DSN may name another server
        env = {
            **env,
            **distributed_env(self._meta_db, self._suffix),
            "DATABASE_URL": f"postgresql://postgres@{host}:{port}/{self._meta_db}",
        }
        if self._local_store:
            env = {k: v for k, v in env.items() if not k.startswith("OBJECT_STORAGE_")}
            env["OBJECT_STORAGE_LOCAL_WORKER"] = "true"
            env["OBJECT_STORAGE_LOCAL_DIR"] = str(self._dir / "objects")
        return env

    def _spawn(self, env: dict[str, str], name: str, nice: int = 0) -> subprocess.Popen[bytes]:
        command = ["nice", "-n", str(nice), FETCHER, "run"] if nice else [FETCHER, "run"]
        with (self._dir / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        self._processes.append(process)
        return process

    def __enter__(self) -> Self:
        if self.mode != "embedded":
            self._meta_db = create_postgres("meta", "SELECT 1")
        env = self._env()
        port = _free_port()
        self.base = f"http://127.0.0.1:{port}"
        manager_mode = "embedded" if self.mode == "embedded" else "manager"
        manager = self._spawn(
            {**env, "FETCHER_MODE": manager_mode, "SERVER_ADDRESS": f"127.0.0.1:{port}"}, "manager"
        )
        self._wait_health(self.base)
        self.pid = self.manager_pid = manager.pid
        if self.mode in ("worker", "worker_local"):
            health = _free_port()
            worker = self._spawn(
                {**env, "FETCHER_MODE": "worker", "HEALTH_PORT": str(health)},
                "worker",
                self._worker_nice,
            )
            self._wait_health(f"http://127.0.0.1:{health}")
            self.pid = self.worker_pid = worker.pid
        return self

    def _wait_health(self, base: str) -> None:
        for _ in range(600):
            try:
                _request("GET", f"{base}/health")
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{base}/health never answered; logs in {self._dir}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for process in self._processes:
            process.send_signal(signal.SIGTERM)
        for process in self._processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
        if self._meta_db is not None:
            drop_postgres(self._meta_db)
            asyncio.run(
                _delete_broker_objects(
                    f"fetcher.bench.{self._suffix}", f"fetcher.bench.events.{self._suffix}"
                )
            )
            if not self._local_store:
                deleted = delete_s3_prefix(bench_prefix(self._suffix))
                print(f"  ({deleted} bench objects deleted from the test bucket)", flush=True)
        if exc is None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _connection(self, body: dict[str, Any]) -> None:
        _request(
            "POST", f"{self.base}/v1/management/connections", body, {"X-Product-Name": PRODUCT}
        )

    def connect_postgres(self, name: str, database: str) -> None:
        host, port = _admin_address()
        self._connection(
            {"configName": name, "type": "POSTGRESQL", "host": host, "port": port,
             "databaseName": database, "userName": "postgres", "password": "trust-auth"}
        )  # fmt: skip

    def connect_mysql(self, name: str, database: str, user: str, password: str) -> None:
        self._connection(
            {"configName": name, "type": "MYSQL", "host": "127.0.0.1", "port": 3306,
             "databaseName": database, "userName": user, "password": password}
        )  # fmt: skip

    def delete_connection(self, name: str) -> None:
        listed = _request(
            "GET", f"{self.base}/v1/management/connections", headers={"X-Product-Name": PRODUCT}
        )
        items = listed["items"] if isinstance(listed, dict) else listed
        for item in items:
            if item["configName"] == name:
                _request(
                    "DELETE",
                    f"{self.base}/v1/management/connections/{item['id']}",
                    headers={"X-Product-Name": PRODUCT},
                )

    def job(
        self, mapped: dict[str, Any], filters: dict[str, Any] | None, meter: Meter | None = None
    ) -> JobFigure:
        """One job to its end; figures of the extracting process, and ``meter``'s from
        submission to the poll that saw the job end."""
        reset_tree_peaks(self.pid)
        _, cpu_before = tree_figures(self.pid)
        if meter is not None:
            meter.start()
        request: dict[str, Any] = {"mappedFields": mapped}
        if filters:
            request["filters"] = filters
        body = {
            "dataRequest": request,
            "metadata": {"source": PRODUCT, "correlationId": secrets.token_hex(8)},
        }
        began = time.perf_counter()
        job_id = _request("POST", f"{self.base}/v1/fetcher", body)["jobId"]
        while (state := _request("GET", f"{self.base}/v1/fetcher/{job_id}"))["status"] not in (
            "completed",
            "failed",
        ):
            time.sleep(POLL_SECONDS)
        wall = time.perf_counter() - began
        meters = meter.stop() if meter is not None else {}
        peak, cpu_after = tree_figures(self.pid)
        cpu = cpu_after - cpu_before
        size, rows = self._result_figures(job_id) if state["status"] == "completed" else (0, None)
        if self._local_store:
            self._delete_local_objects()
        return JobFigure(
            state["status"], _seconds_between(state["createdAt"], state["completedAt"]), wall,
            size, rows, peak, state.get("metadata", {}).get("error"), cpu, meters,
        )  # fmt: skip

    def _delete_local_objects(self) -> None:
        """Every stored object of the local store (a 1.5 M-row ledger is 850 MB a job); the
        directories stay, the store created them at start."""
        for path in (self._dir / "objects").rglob("*"):
            if path.is_file():
                path.unlink(missing_ok=True)

    def _result_figures(self, job_id: str) -> tuple[int, int | None]:
        """``size_bytes`` and ``row_count`` from the job's ``job.completed`` feed item."""
        after = "0"
        for _ in range(1000):
            page = _request("GET", f"{self.base}/v1/events?after={after}&limit=1000")
            for item in page["items"]:
                data = item["data"]
                if data.get("job_id") == job_id and "result" in data:
                    result = data["result"]
                    count = result.get("row_count", data.get("row_count"))
                    return int(result["size_bytes"]), None if count is None else int(count)
            if not page["items"]:
                break
            after = page["next"]
        raise RuntimeError(f"no job.completed feed item for {job_id}")
