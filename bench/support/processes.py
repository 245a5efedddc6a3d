"""Fetcher processes for the benchmarks: a Manager and a Worker, or one embedded process.

:class:`FetcherProcesses` starts either a Manager and a Worker (``fetcher run``, PostgreSQL
metadata store, RabbitMQ, the loopback SeaweedFS S3 server or a local directory) or one
embedded process (SQLite metadata, local store), each on loopback ports, and stops them by PID.
:meth:`FetcherProcesses.job` submits one job and reports its time (``completedAt −
createdAt``), document size and the extracting process's peak RSS (``VmHWM``, reset through
``/proc/<pid>/clear_refs`` before the job; summed with its child processes', embedded mode's
batch encoder) and CPU, and what a :class:`Meter` (:class:`bench.support.sampling.CpuMeter`)
measured meanwhile. The Worker's objects go under a prefix of their own, deleted from the test
bucket on exit; a local store's after each job.
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
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from bench.support.databases import admin_address, create_postgres, drop_postgres
from bench.support.sampling import reset_tree_peaks, tree_figures
from bench.support.services import (
    FETCHER,
    KEY,
    bench_prefix,
    delete_broker_objects,
    delete_s3_prefix,
    distributed_env,
    free_port,
)

PRODUCT = "bench"
POLL_SECONDS = 0.1


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
    #: The figures of the job's ``meter`` (:class:`bench.support.sampling.CpuMeter`) over the same
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
        host, port = admin_address()  # FETCHER_BENCH_POSTGRES_DSN may name another server
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
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        manager_mode = "embedded" if self.mode == "embedded" else "manager"
        manager = self._spawn(
            {**env, "FETCHER_MODE": manager_mode, "SERVER_ADDRESS": f"127.0.0.1:{port}"}, "manager"
        )
        self._wait_health(self.base)
        self.pid = self.manager_pid = manager.pid
        if self.mode in ("worker", "worker_local"):
            health = free_port()
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
                delete_broker_objects(
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
        host, port = admin_address()
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
