"""Building blocks of the end-to-end harness: real ``fetcher run`` processes, the Manager API,
an AMQP event collector, the dead-letter queue, object storage and independent verifiers.

Everything here checks Fetcher from the outside, the way a consumer would: signatures and
HMACs are recomputed with :mod:`hmac`, result objects are decrypted with ``cryptography``
directly, and rows are compared with a direct psycopg query. Only the keys come from the
product (``fetcher derive-key``), as the customer's Job events page prescribes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import httpx
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from tests.services import POSTGRES_ADMIN_DSN

T = TypeVar("T")

#: The §6.6 test-vector master key; the Manager and every Worker share it.
MASTER_KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
PRODUCT = "payments"
CE_SOURCE = "//lerian.fetcher/worker"
DLQ = "fetcher.dlq"
PENDING_TIMEOUT_SECONDS = 300
FETCHER_BIN = str(Path(sys.executable).with_name("fetcher"))
DEFAULT_TIMEOUT = 30.0
#: §6.2: the HKDF ``info`` of the key that signs work messages (§7.3).
INTERNAL_HMAC_LABEL = b"fetcher-internal-hmac-v1"


class HarnessError(AssertionError):
    """A harness wait ran out of time or a process misbehaved (reported as a test failure)."""


async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    what: str,
    *,
    within: float = DEFAULT_TIMEOUT,
    interval: float = 0.1,
) -> T:
    """Poll ``probe`` until it returns something other than ``None``; fail after ``within``."""
    deadline = time.monotonic() + within
    while True:
        value = await probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise HarnessError(f"timed out after {within:.0f}s waiting for {what}")
        await asyncio.sleep(interval)


def free_port() -> int:
    """A TCP port that nothing listens on right now (closed again before returning)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# --- processes ---------------------------------------------------------------------------------


@dataclass
class FetcherProcess:
    """One ``fetcher run`` subprocess with its stdout/stderr captured to files."""

    name: str
    process: subprocess.Popen[bytes]
    base_url: str
    stdout_path: Path
    stderr_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def logs(self) -> str:
        """Everything the process wrote so far (stdout JSON lines, then stderr)."""
        return self.stdout_path.read_text(errors="replace") + self.stderr_path.read_text(
            errors="replace"
        )

    def log_tail(self, chars: int = 3000) -> str:
        return f"--- {self.name} (pid {self.pid}) log tail ---\n{self.logs()[-chars:]}"

    async def wait_healthy(self, client: httpx.AsyncClient, within: float = 30.0) -> None:
        """Poll ``/health`` until it answers 200; fail at once if the process exits."""

        async def healthy() -> bool | None:
            if self.process.poll() is not None:
                raise HarnessError(f"exited with {self.process.returncode}\n{self.log_tail()}")
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(f"{self.base_url}/health", timeout=2.0)).status_code == 200:
                    return True
            return None

        await eventually(healthy, f"{self.name} /health 200", within=within)

    async def metrics(self, client: httpx.AsyncClient) -> dict[str, float]:
        """``/metrics`` samples keyed by name and labels, e.g. ``x_total{reason="y"}``."""
        response = await client.get(f"{self.base_url}/metrics")
        assert response.status_code == 200, response.text
        samples = {}
        for line in response.text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples

    async def wait_for_log(self, needle: str, within: float = DEFAULT_TIMEOUT) -> None:
        """Poll the captured output until it contains ``needle``."""

        async def logged() -> bool | None:
            return True if needle in self.logs() else None

        await eventually(logged, f"{self.name} to log {needle!r}", within=within)

    async def get_json(self, client: httpx.AsyncClient, path: str) -> tuple[int, Any]:
        """``GET path`` on the process's port: the status code and the parsed JSON body."""
        response = await client.get(f"{self.base_url}{path}", timeout=5.0)
        return response.status_code, response.json()

    def sigterm(self) -> None:
        """Send SIGTERM (the §9.3 drain) and return at once; see :meth:`wait_exit`."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    async def wait_exit(self, within: float) -> int | None:
        """The exit code, or ``None`` if the process is still running after ``within``."""
        try:
            return await asyncio.to_thread(self.process.wait, within)
        except subprocess.TimeoutExpired:
            return None

    async def terminate(self, within: float = 30.0) -> int:
        """SIGTERM (the §9.3 drain) and wait; SIGKILL and fail if it does not exit in time."""
        self.sigterm()
        code = await self.wait_exit(within)
        if code is None:
            await self.kill()
            raise HarnessError(f"{self.name} ignored SIGTERM for {within:.0f}s")
        return code

    async def kill(self) -> int:
        """SIGKILL: no drain, no flush."""
        if self.process.poll() is None:
            self.process.kill()
        return await asyncio.to_thread(self.process.wait)


@dataclass
class ProcessLauncher:
    """Starts Manager and Worker processes from one base environment; stops them all at the
    end, each by its own PID."""

    base_env: Mapping[str, str]
    log_dir: Path
    http: httpx.AsyncClient
    #: Values no log line may ever contain (§9.2).
    secrets: Sequence[str] = ()
    started: list[FetcherProcess] = field(default_factory=list)

    def _spawn(self, name: str, env: Mapping[str, str], base_url: str) -> FetcherProcess:
        stem = f"{len(self.started):02d}-{name}"
        stdout_path = self.log_dir / f"{stem}.stdout.log"
        stderr_path = self.log_dir / f"{stem}.stderr.log"
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            process = subprocess.Popen(  # noqa: S603 - our own console script, fixed argv
                [FETCHER_BIN, "run"],
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        started = FetcherProcess(name, process, base_url, stdout_path, stderr_path)
        self.started.append(started)
        return started

    def start_manager(self, **overrides: str) -> FetcherProcess:
        """A Manager process, not waited for (it may still be starting)."""
        port = free_port()
        env = {**self.base_env, "FETCHER_MODE": "manager", "SERVER_ADDRESS": f"127.0.0.1:{port}"}
        return self._spawn("manager", {**env, **overrides}, f"http://127.0.0.1:{port}")

    def start_worker(self, **overrides: str) -> FetcherProcess:
        """A Worker process, not waited for (it may still be starting)."""
        port = free_port()
        env = {**self.base_env, "FETCHER_MODE": "worker", "HEALTH_PORT": str(port)}
        return self._spawn("worker", {**env, **overrides}, f"http://127.0.0.1:{port}")

    async def manager(self, **overrides: str) -> FetcherProcess:
        """A healthy Manager; ``overrides`` replace variables of the base environment."""
        started = self.start_manager(**overrides)
        await started.wait_healthy(self.http)
        return started

    async def worker(self, **overrides: str) -> FetcherProcess:
        """A healthy Worker; ``overrides`` replace variables of the base environment."""
        started = self.start_worker(**overrides)
        await started.wait_healthy(self.http)
        return started

    async def run_to_exit(
        self, *, unset: Sequence[str] = (), within: float = 30.0, **overrides: str
    ) -> subprocess.CompletedProcess[str]:
        """``fetcher run`` to its end (a refusal): the base environment without ``unset``,
        with ``overrides``; stdout and stderr captured as text."""
        env = {k: v for k, v in {**self.base_env, **overrides}.items() if k not in unset}
        return await asyncio.to_thread(
            subprocess.run,
            [FETCHER_BIN, "run"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=within,
            check=False,
        )

    @contextlib.asynccontextmanager
    async def running_worker(self, **overrides: str) -> AsyncIterator[FetcherProcess]:
        """A Worker for the duration of the block, then SIGTERM: the relay flushes and the
        process must exit 0. A failing block gets the Worker's log tail attached."""
        started = await self.worker(**overrides)
        try:
            yield started
        except BaseException as exc:
            exc.add_note(started.log_tail())
            await started.terminate()
            raise
        if (code := await started.terminate()) != 0:  # §9.3: a drained Worker exits cleanly
            raise HarnessError(f"exit code {code} after SIGTERM\n{started.log_tail()}")
        self.assert_no_secrets(started)

    def assert_no_secrets(self, started: FetcherProcess) -> None:
        """§9.2: neither the master key, nor a password, nor the S3 secret key is logged."""
        logs = started.logs()
        leaked = [i for i, secret in enumerate(self.secrets) if secret in logs]
        assert not leaked, f"{started.name} logged secret #{leaked} of the launcher's list"

    async def stop_all(self) -> None:
        for started in self.started:
            if started.process.poll() is None:
                with contextlib.suppress(HarnessError):
                    await started.terminate(within=15.0)
            await started.kill()


@contextlib.asynccontextmanager
async def embedded_fetcher(workdir: Path, **env: str) -> AsyncIterator[FetcherProcess]:
    """A healthy embedded ``fetcher run`` on loopback without a broker: its metadata store and
    result objects under ``workdir/state``, its logs under ``workdir/logs``; ``env`` adds or
    replaces variables. Stopped by PID at the end (its logs checked for the master key)."""
    base = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "APP_ENC_KEY": MASTER_KEY,
        "DATABASE_URL": f"sqlite:///{workdir / 'state' / 'meta.db'}",
        "OBJECT_STORAGE_LOCAL_DIR": str(workdir / "state" / "objects"),
        "READYZ_DRAIN_DELAY_SEC": "0",
        "LOG_LEVEL": "warn",
    }
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    async with httpx.AsyncClient(timeout=30.0) as http:
        launcher = ProcessLauncher({**base, **env}, logs, http, secrets=(MASTER_KEY,))
        try:
            yield await launcher.manager(FETCHER_MODE="embedded")
        finally:
            await launcher.stop_all()


# --- the Manager API ---------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


@dataclass
class ManagerApi:
    """The few Manager routes the scenarios use (§2.6.1, §2.8, §2.12)."""

    http: httpx.AsyncClient
    base_url: str

    async def create_connection(
        self, config_name: str, database: str, *, password: str, host: str, port: int
    ) -> str:
        """A POSTGRESQL connection as ``postgres``; its ID."""
        return await self.create(
            {
                "configName": config_name,
                "type": "POSTGRESQL",
                "host": host,
                "port": port,
                "databaseName": database,
                "userName": "postgres",
                "password": password,
            }
        )

    async def create(self, body: Mapping[str, object]) -> str:
        """``POST /v1/management/connections`` for :data:`PRODUCT` (must answer 201); its ID."""
        response = await self.http.post(
            f"{self.base_url}/v1/management/connections",
            json=body,
            headers={"X-Product-Name": PRODUCT},
        )
        assert response.status_code == 201, response.text
        connection_id: str = response.json()["id"]
        return connection_id

    async def post_job(
        self,
        mapped_fields: Mapping[str, object],
        *,
        filters: Mapping[str, object] | None = None,
        limits: Mapping[str, object] | None = None,
        metadata: Mapping[str, object] | None = None,
    ) -> httpx.Response:
        """``POST /v1/fetcher`` as given, whatever the answer (202 new, 200 duplicate, …).
        A fresh ``correlationId`` keeps every submission distinct for deduplication (§3.8)
        unless ``metadata`` is given."""
        data_request: dict[str, object] = {"mappedFields": mapped_fields}
        if filters is not None:
            data_request["filters"] = filters
        if limits is not None:
            data_request["limits"] = limits
        meta = metadata or {"source": PRODUCT, "correlationId": unique("e2e")}
        return await self.http.post(
            f"{self.base_url}/v1/fetcher", json={"dataRequest": data_request, "metadata": meta}
        )

    async def submit(
        self,
        mapped_fields: Mapping[str, object],
        *,
        filters: Mapping[str, object] | None = None,
        limits: Mapping[str, object] | None = None,
        metadata: Mapping[str, object] | None = None,
    ) -> str:
        """Create a job (202) and return its ID (see :meth:`post_job`)."""
        response = await self.post_job(
            mapped_fields, filters=filters, limits=limits, metadata=metadata
        )
        assert response.status_code == 202, response.text
        job_id: str = response.json()["jobId"]
        return job_id

    async def job(self, job_id: str) -> dict[str, Any]:
        response = await self.http.get(f"{self.base_url}/v1/fetcher/{job_id}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def wait_terminal(self, job_id: str, within: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Poll ``GET /v1/fetcher/{id}`` until the job is ``completed`` or ``failed``."""

        async def terminal() -> dict[str, Any] | None:
            job = await self.job(job_id)
            return job if job["status"] in ("completed", "failed") else None

        return await eventually(terminal, f"job {job_id} to finish", within=within)

    async def feed_items(self, job_id: str) -> list[dict[str, Any]]:
        """Every §2.12 feed item of ``job_id`` (the feed is read from the start)."""
        items: list[dict[str, Any]] = []
        after = "0"
        while True:
            response = await self.http.get(
                f"{self.base_url}/v1/events", params={"after": after, "limit": 1000}
            )
            assert response.status_code == 200, response.text
            page = response.json()
            items += [i for i in page["items"] if i["data"].get("job_id") == job_id]
            if not page["items"]:
                return items
            after = page["next"]


# --- AMQP --------------------------------------------------------------------------------------


def _text(value: object) -> object:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class ReceivedEvent:
    """One message as the test consumer queue received it."""

    exchange: str
    routing_key: str
    body: bytes
    headers: Mapping[str, object]
    content_type: str | None
    delivery_mode: int | None
    message_id: str | None

    @property
    def payload(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.body)
        return doc

    @property
    def job_id(self) -> str | None:
        job_id = self.payload.get("job_id")
        return job_id if isinstance(job_id, str) else None


@dataclass
class EventCollector:
    """Collects every message bound to the test queue, in arrival order."""

    received: list[ReceivedEvent] = field(default_factory=list)

    async def on_message(self, message: Any) -> None:
        async with message.process():
            headers = {str(k): _text(v) for k, v in (message.headers or {}).items()}
            self.received.append(
                ReceivedEvent(
                    exchange=str(message.exchange or ""),
                    routing_key=str(message.routing_key or ""),
                    body=bytes(message.body),
                    headers=headers,
                    content_type=message.content_type,
                    delivery_mode=int(message.delivery_mode) if message.delivery_mode else None,
                    message_id=message.message_id,
                )
            )

    def for_job(self, job_id: str) -> list[ReceivedEvent]:
        return [e for e in self.received if e.job_id == job_id]

    async def wait_for(
        self, job_id: str, routing_key: str, within: float = DEFAULT_TIMEOUT
    ) -> ReceivedEvent:
        """The first ``routing_key`` event of ``job_id`` (polling the received list)."""

        async def arrived() -> ReceivedEvent | None:
            matches = [e for e in self.for_job(job_id) if e.routing_key == routing_key]
            return matches[0] if matches else None

        return await eventually(arrived, f"{routing_key} for job {job_id}", within=within)


@dataclass(frozen=True)
class RawMessage:
    """A work message (or its dead-lettered copy) as bytes and AMQP header values."""

    body: bytes
    headers: Mapping[str, Any]
    #: The AMQP properties as received (``None`` for a message built by a test).
    content_type: str | None = field(default=None, compare=False)
    delivery_mode: int | None = field(default=None, compare=False)

    @classmethod
    def of(cls, message: Any) -> RawMessage:
        headers = {str(k): _text(v) for k, v in (message.headers or {}).items()}
        mode = int(message.delivery_mode) if message.delivery_mode else None
        return cls(bytes(message.body), headers, message.content_type, mode)

    @property
    def job_id(self) -> str:
        return str(json.loads(self.body)["jobId"])

    @property
    def death_reasons(self) -> list[str]:
        """The ``x-death`` reasons RabbitMQ recorded (``rejected`` for ``basic.reject``)."""
        deaths = self.headers.get("x-death")
        return [str(_text(d.get("reason"))) for d in deaths] if isinstance(deaths, list) else []


async def take_work_messages(
    channel: Any, work_queue: str, count: int, within: float = DEFAULT_TIMEOUT
) -> list[RawMessage]:
    """Remove ``count`` messages from the work queue (no Worker may be running)."""
    queue = await channel.declare_queue(work_queue, passive=True)
    taken: list[RawMessage] = []

    async def take() -> list[RawMessage] | None:
        while len(taken) < count and (message := await queue.get(fail=False)) is not None:
            taken.append(RawMessage.of(message))
            await message.ack()
        return taken if len(taken) >= count else None

    return await eventually(take, f"{count} work messages on {work_queue}", within=within)


async def take_all_messages(channel: Any, queue_name: str) -> list[RawMessage]:
    """Remove every message ready on ``queue_name`` now (``basic.get`` until it is empty)."""
    queue = await channel.declare_queue(queue_name, passive=True)
    taken: list[RawMessage] = []
    while (message := await queue.get(fail=False)) is not None:
        taken.append(RawMessage.of(message))
        await message.ack()
    return taken


async def publish_work(channel: Any, work_queue: str, message: RawMessage) -> None:
    """Publish as the Manager does (§7.1, §7.2): default exchange, routing key = the queue."""
    import aio_pika

    await channel.default_exchange.publish(
        aio_pika.Message(
            message.body,
            headers=dict(message.headers),
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        ),
        routing_key=work_queue,
    )


async def take_dead_letters(channel: Any, work_queue: str) -> list[RawMessage]:
    """Remove and return the messages dead-lettered from ``work_queue`` so far (one pass).

    ``fetcher.dlq`` is shared by every Fetcher on the broker, so messages of other queues are
    left in place: the scan holds them unacknowledged and requeues them at the end.
    """
    queue = await channel.declare_queue(DLQ, passive=True)
    ours: list[RawMessage] = []
    foreign = []
    try:
        while (message := await queue.get(no_ack=False, fail=False)) is not None:
            deaths = (message.headers or {}).get("x-death") or []
            if any(_text(d.get("queue")) == work_queue for d in deaths):
                ours.append(RawMessage.of(message))
                await message.ack()
            else:
                foreign.append(message)
    finally:
        for message in foreign:
            await message.nack(requeue=True)
    return ours


# --- signatures and crypto, recomputed independently -------------------------------------------


def signing_input(
    t: str, *, job_id: str = "", exchange: str, routing_key: str, body: bytes, tenant: str = ""
) -> bytes:
    """The §7.3 / §8.5 signed bytes: t, v1, tenant, jobId, exchange, routing key, body."""
    head = f"{t}\nv1\n{tenant}\n{job_id}\n{exchange}\n{routing_key}\n"
    return head.encode() + bytes(body)


def hmac_hex(key: bytes, data: bytes) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def derive_internal_key(master_key: str = MASTER_KEY) -> bytes:
    """The §6.2 internal HMAC key, recomputed: HKDF-SHA256 over the decoded master key, no
    salt, ``info`` = ``fetcher-internal-hmac-v1``, 32 bytes (``derive-key`` does not print it)."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=INTERNAL_HMAC_LABEL)
    return hkdf.derive(base64.b64decode(master_key, validate=True))


def decrypt_result_object(storage_key: bytes, stored: bytes) -> bytes:
    """§6.3: ASCII base64(nonce(12) ‖ ciphertext ‖ tag(16)), AES-256-GCM, no AAD."""
    raw = base64.b64decode(stored, validate=True)
    return AESGCM(storage_key).decrypt(raw[:12], raw[12:], None)


def derive_cli_key(purpose: str) -> bytes:
    """The key ``fetcher derive-key`` prints (§6.5), read from its one output line."""
    env = {"PATH": os.environ.get("PATH", ""), "APP_ENC_KEY": MASTER_KEY}
    output = subprocess.run(  # noqa: S603 - our own console script, fixed argv
        [FETCHER_BIN, "derive-key", "--purpose", purpose],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    label = {"external": "External HMAC Key (hex): ", "storage": "Storage Key (hex): "}[purpose]
    assert output.startswith(label), output
    assert output.count("\n") == 1, output
    return bytes.fromhex(output.removeprefix(label).strip())


# --- §5.3 value encoding, for comparing rows with a direct SQL query ---------------------------


def encode_value(value: object) -> object:
    """A psycopg value as §5.3 renders it in the result document."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        moment = value.astimezone(UTC) if value.tzinfo else value
        text = moment.strftime("%Y-%m-%dT%H:%M:%S")
        if moment.microsecond:
            text += "." + f"{moment.microsecond:06d}".rstrip("0")
        return text + "Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    return value


def encode_rows(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> list[dict[str, Any]]:
    return [{c: encode_value(v) for c, v in zip(columns, row, strict=True)} for row in rows]


def json_pairs(raw: bytes) -> Any:
    """``raw`` parsed with every object kept as its list of (key, value) pairs, in the order
    the bytes wrote them."""
    return json.loads(raw, object_pairs_hook=list)


def keys_of(pairs: Sequence[tuple[str, Any]]) -> list[str]:
    return [key for key, _ in pairs]


# --- databases ---------------------------------------------------------------------------------


def _admin_parts() -> dict[str, Any]:
    import psycopg

    return dict(psycopg.conninfo.conninfo_to_dict(POSTGRES_ADMIN_DSN))


@dataclass(frozen=True)
class Database:
    """A database on the test PostgreSQL server."""

    name: str

    @property
    def host(self) -> str:
        return str(_admin_parts().get("host", "127.0.0.1"))

    @property
    def port(self) -> int:
        return int(str(_admin_parts().get("port", 5432)))

    @property
    def conninfo(self) -> str:
        import psycopg

        parts = {k: str(v) for k, v in _admin_parts().items()}
        parts["dbname"] = self.name
        return psycopg.conninfo.make_conninfo(**parts)

    @property
    def url(self) -> str:
        """The ``postgresql://`` URL form (``DATABASE_URL``)."""
        parts = _admin_parts()
        userinfo = str(parts.get("user", "postgres"))
        if parts.get("password"):
            userinfo += f":{parts['password']}"
        return f"postgresql://{userinfo}@{self.host}:{self.port}/{self.name}"

    def query(
        self, sql: str, params: Sequence[object] = ()
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Column names and rows of one read-only query (session time zone UTC)."""
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute("SET TIME ZONE 'UTC'")
            cursor = conn.execute(sql.encode(), params or None)
            columns = [c.name for c in cursor.description or ()]
            return columns, cursor.fetchall()

    def records(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        """The rows of :meth:`query` as column → value mappings."""
        columns, rows = self.query(sql, params)
        return [dict(zip(columns, row, strict=True)) for row in rows]

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        """One data-changing statement (autocommit); returns the affected row count."""
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            return conn.execute(sql.encode(), params or None).rowcount


class DatabaseFactory:
    """Creates databases and drops them (``WITH (FORCE)``), always by their own name."""

    def __init__(self) -> None:
        self.created: list[Database] = []

    def reserve(self, prefix: str) -> Database:
        """A fresh name that no database has yet; :meth:`materialize` creates it later, and
        :meth:`drop_all` drops it if it exists by then."""
        database = Database(f"{prefix}_{secrets.token_hex(4)}")
        self.created.append(database)
        return database

    def create(self, prefix: str, schema_sql: str = "") -> Database:
        return self.materialize(self.reserve(prefix), schema_sql)

    def materialize(self, database: Database, schema_sql: str = "") -> Database:
        """Create a database named by :meth:`reserve` (and run ``schema_sql`` in it)."""
        import psycopg

        with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database.name}"'.encode())
        if schema_sql:
            with psycopg.connect(database.conninfo, autocommit=True) as conn:
                conn.execute(schema_sql.encode())
        return database

    def drop(self, database: Database) -> None:
        import psycopg

        with psycopg.connect(POSTGRES_ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database.name}" WITH (FORCE)'.encode())
        if database in self.created:
            self.created.remove(database)

    def drop_all(self) -> None:
        for database in list(self.created):
            self.drop(database)


def slow_view_sql(view: str, rows: int, seconds_per_row: float) -> str:
    """DDL for ``view`` (schema-qualified), whose every row sleeps ``seconds_per_row``:
    planning is instant, fetching all ``rows`` takes ``rows * seconds_per_row`` seconds."""
    function = f"{view}_nap"
    return f"""
CREATE FUNCTION {function}(i integer) RETURNS integer LANGUAGE sql VOLATILE
    AS $$ SELECT i FROM (SELECT pg_sleep({seconds_per_row})) AS nap $$;
CREATE VIEW {view} AS SELECT {function}(g) AS id FROM generate_series(1, {rows}) AS g;
"""


def age_job(database: Database, job_id: str, column: str, seconds: float) -> None:
    """Move a job's ``created_at`` or ``started_at`` ``seconds`` into the past in the metadata
    database: elapsed time for the reaper (§4.4) without waiting for it."""
    if column not in ("created_at", "started_at"):
        raise ValueError(f"not a job timestamp: {column}")
    changed = database.execute(
        f"UPDATE jobs SET {column} = {column} - make_interval(secs => %s) WHERE id = %s",
        (seconds, job_id),
    )
    assert changed == 1, f"job {job_id} not found"


def outbox_rows(database: Database, job_id: str) -> list[dict[str, Any]]:
    """The job's §8.6 outbox rows (``ce_id``, ``routing_key``, ``created_at``, ``sent_at``,
    ``age_seconds``), oldest first, straight from the metadata database."""
    return database.records(
        "SELECT ce_id, routing_key, created_at, sent_at,"
        " extract(epoch FROM now() - created_at)::float8 AS age_seconds"
        " FROM outbox WHERE job_id = %s ORDER BY id",
        (job_id,),
    )


# --- the assembled stack -----------------------------------------------------------------------


@dataclass(frozen=True)
class Names:
    """Broker names unique to this session."""

    work_queue: str
    events_exchange: str
    consumer_queue: str


@dataclass(frozen=True)
class Broker:
    """The session's broker names, the test's own AMQP connection, and the collector behind
    the consumer queue."""

    names: Names
    connection: Any
    collector: EventCollector

    @contextlib.asynccontextmanager
    async def channel(self) -> AsyncIterator[Any]:
        """A short-lived channel, so that one broker-side channel error stays contained."""
        channel = await self.connection.channel()
        try:
            yield channel
        finally:
            if not channel.is_closed:
                await channel.close()

    async def route_events(self, channel: Any) -> Any:
        """Declare the events exchange (durable topic, as the Worker does) and the consumer
        queue, bind ``job.*`` between them, and return the queue. Idempotent."""
        import aio_pika

        exchange = await channel.declare_exchange(
            self.names.events_exchange, aio_pika.ExchangeType.TOPIC, durable=True
        )
        queue = await channel.declare_queue(self.names.consumer_queue, durable=False)
        await queue.bind(exchange, routing_key="job.*")
        return queue

    async def unroute_events(self) -> None:
        """Delete the events exchange (its bindings go with it): a publish to it now fails
        with a channel error, until :meth:`route_events` restores the route."""
        async with self.channel() as channel:
            await channel.exchange_delete(self.names.events_exchange)

    async def fence(self, within: float = DEFAULT_TIMEOUT) -> None:
        """Publish a marker through the events exchange and wait until the collector has it.

        Everything the broker confirmed to a publisher before this call was enqueued on the
        consumer queue ahead of the marker, so afterwards the collector holds every event a
        stopped Worker ever sent: a negative check ("no second event") needs no sleep."""
        import aio_pika

        marker = unique("fence")
        async with self.channel() as channel:
            exchange = await channel.get_exchange(self.names.events_exchange, ensure=False)
            body = json.dumps({"job_id": marker}).encode()
            await exchange.publish(aio_pika.Message(body), routing_key="job.fence")
        await self.collector.wait_for(marker, "job.fence", within=within)

    async def queue_state(self, queue_name: str) -> tuple[int, int]:
        """``(ready messages, consumers)`` of a queue, from a passive declare."""
        async with self.channel() as channel:
            queue = await channel.declare_queue(queue_name, passive=True)
            result = queue.declaration_result
            return int(result.message_count or 0), int(result.consumer_count or 0)


@dataclass(frozen=True)
class ResultStore:
    """The session's bucket, inspected with a synchronous boto3 client."""

    s3: Any
    bucket: str

    def read(self, key: str) -> bytes:
        data: bytes = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return data

    def head(self, key: str) -> tuple[str, datetime]:
        """``(ETag, LastModified)`` of a stored object: a rewrite changes at least one."""
        meta = self.s3.head_object(Bucket=self.bucket, Key=key)
        return str(meta["ETag"]), meta["LastModified"]

    def keys_for(self, job_id: str) -> list[str]:
        """Objects and unfinished multipart uploads under the job's object key (§6.3)."""
        key = f"external-data/{job_id}.json"
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=key).get("Contents", [])
        uploads = self.s3.list_multipart_uploads(Bucket=self.bucket, Prefix=key)
        return [o["Key"] for o in listed] + [u["Key"] for u in uploads.get("Uploads", [])]


@dataclass(frozen=True)
class ConsumerKeys:
    """The keys a consumer holds (§6.5), as printed by ``fetcher derive-key``."""

    external: bytes
    storage: bytes


@dataclass(frozen=True)
class Stack:
    """What a scenario works with: the Manager and its API, the process launcher, the broker,
    the source database and the result bucket."""

    api: ManagerApi
    manager: FetcherProcess
    launcher: ProcessLauncher
    broker: Broker
    source: Database
    results: ResultStore
    keys: ConsumerKeys

    @property
    def names(self) -> Names:
        return self.broker.names


MS_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
FAILED_PAYLOAD_KEYS = ["job_id", "status", "metadata"]


def assert_envelope(stack: Stack, event: ReceivedEvent, status: str) -> str:
    """§8.1 properties, all eleven §8.4 headers (and nothing else but the three §8.5 signing
    headers), a compact ``ensure_ascii=False`` body, and the §8.5 signature recomputed with
    the ``derive-key`` external key. Returns ``ce-time``."""
    job_id = event.job_id
    assert event.exchange == stack.names.events_exchange
    assert event.routing_key == f"job.{status}"
    assert event.content_type == "application/json"
    assert event.delivery_mode == 2
    assert event.message_id is None
    headers = dict(event.headers)
    ce_time, t, signature = (headers.pop(k) for k in ("ce-time", "t", "x-message-signature"))
    assert headers == {
        "ce-specversion": "1.0",
        "ce-id": f"fetcher.job.{status}.{job_id}",
        "ce-source": CE_SOURCE,
        "ce-type": f"studio.lerian.job.{status}",
        "ce-subject": job_id,
        "ce-resourcetype": "job",
        "ce-eventtype": status,
        "ce-schemaversion": "2.0.0",
        "ce-datacontenttype": "application/json",
        "ce-tenantid": "single-tenant",
        "signature-version": "v1",
    }
    assert isinstance(ce_time, str)
    assert MS_TIMESTAMP.fullmatch(ce_time), ce_time
    assert isinstance(t, str)
    assert re.fullmatch(r"[0-9]{1,12}", t), t
    signed = signing_input(
        t, exchange=stack.names.events_exchange, routing_key=event.routing_key, body=event.body
    )
    assert signature == hmac_hex(stack.keys.external, signed)
    compact = json.dumps(event.payload, separators=(",", ":"), ensure_ascii=False)
    assert event.body == compact.encode()
    return ce_time


async def assert_failed_once(stack: Stack, job_id: str, error: str | re.Pattern[str]) -> str:
    """Check a failed job after its Worker stopped (so the relay has flushed): the job and
    its one signed ``job.failed`` event (AMQP and feed) carry ``error`` (§4.5, §8.3, §8.4),
    and no object or multipart upload exists at its key (§4.3, §5.5). Returns the text."""
    job = await stack.api.job(job_id)
    assert job["status"] == "failed", job
    text = str(job["metadata"]["error"])
    if isinstance(error, str):
        assert text == error
    else:
        assert error.fullmatch(text), text
    assert "completedAt" in job
    assert "resultPath" not in job
    assert "resultHmac" not in job
    events = stack.broker.collector.for_job(job_id)
    assert [e.routing_key for e in events] == ["job.failed"]
    event = events[0]
    assert_envelope(stack, event, "failed")
    pairs = json_pairs(event.body)
    assert keys_of(pairs) == FAILED_PAYLOAD_KEYS
    # §8.3: the submitted metadata in its order; ``error`` keeps a caller's position.
    assert keys_of(dict(pairs)["metadata"]) == list(job["metadata"])
    assert event.payload == {
        "job_id": job_id,
        "status": "failed",
        "metadata": {**job["metadata"], "error": {"message": text}},
    }
    feed = await stack.api.feed_items(job_id)
    assert [(i["routingKey"], i["data"]) for i in feed] == [("job.failed", event.payload)]
    assert stack.results.keys_for(job_id) == []
    return text


@dataclass(frozen=True)
class OwnQueueManager:
    """An extra Manager publishing to a work queue of its own, which no Worker consumes."""

    api: ManagerApi
    process: FetcherProcess
    work_queue: str


@contextlib.asynccontextmanager
async def manager_with_own_queue(stack: Stack, **overrides: str) -> AsyncIterator[OwnQueueManager]:
    """A healthy Manager (same metadata database, so ``pg_src`` exists) whose work queue is
    unique to the block; at the end the Manager is stopped and the queue deleted."""
    queue = f"{stack.names.work_queue}.{unique('own')}"
    manager = await stack.launcher.manager(RABBITMQ_FETCHER_WORK_QUEUE=queue, **overrides)
    try:
        yield OwnQueueManager(ManagerApi(stack.launcher.http, manager.base_url), manager, queue)
    except BaseException as exc:
        exc.add_note(manager.log_tail())
        raise
    finally:
        await manager.terminate()
        async with stack.broker.channel() as channel:
            await channel.queue_delete(queue)


async def drain_canceled(stack: Stack, *job_ids: str) -> None:
    """Jobs canceled while no Worker ran: a Worker drops their work messages and publishes
    their one ``job.canceled`` each, so the shared session leaves nothing queued or unsent."""
    async with stack.launcher.running_worker():
        for job_id in job_ids:
            await stack.broker.collector.wait_for(job_id, "job.canceled", within=60.0)
    await stack.broker.fence()
    for job_id in job_ids:
        assert [e.routing_key for e in stack.broker.collector.for_job(job_id)] == ["job.canceled"]


def rotated_env(new_key: str) -> dict[str, str]:
    """The variables of a process after a rotation of ``APP_ENC_KEY`` (docs/key-rotation.md):
    the new key current (version 2), the session's key previous (version 1)."""
    return {
        "APP_ENC_KEY": new_key,
        "APP_ENC_KEY_VERSION": "2",
        "APP_ENC_KEY_PREVIOUS": f"1:{MASTER_KEY}",
    }


async def run_fetcher(
    env: Mapping[str, str], *args: str, seconds: float = 120.0
) -> tuple[int, bytes, bytes]:
    """One ``fetcher`` command to its end, without blocking the loop: exit code, stdout,
    stderr."""
    process = await asyncio.create_subprocess_exec(
        FETCHER_BIN,
        *args,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), seconds)
    assert process.returncode is not None
    return process.returncode, out, err


def jobs_cli(base_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``fetcher jobs args…`` against the Manager at ``base_url`` (``FETCHER_API_URL``)."""
    env = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8", "FETCHER_API_URL": base_url}
    return subprocess.run(  # noqa: S603 - our own console script, fixed arguments
        [FETCHER_BIN, "jobs", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
