"""Configuration from the environment (contract §9.1), read once at startup.

``Settings.from_env`` validates everything up front and raises :class:`StartupRefused` with the
exact §9.3 reason; the CLI prints ``startup refused: <reason>`` and exits 1 before opening any
port. Secrets are held with ``repr=False`` so a logged ``Settings`` never shows them.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from fetcher.crypto import KeySet, MasterKeyError, parse_master_key
from fetcher.engine import ConnectionDescriptor
from fetcher.services.connections.internal_datasources import (
    parse_internal_datasources,
    parse_internal_tenants,
)
from fetcher.settings.auth import AuthMode, AuthSettings, hs256_key, is_loopback, jwks_url_ok
from fetcher.settings.trace_link import valid_trace_url_template
from fetcher.settings.tracing import TracingSettingRefused, TracingSettings, read_tracing_settings

__all__ = [
    "Mode",
    "ObjectStorageSettings",
    "RabbitSettings",
    "Settings",
    "StartupRefused",
]

_VERSION_RE = re.compile(r"[A-Za-z0-9._-]{1,32}")
_INT_RE = re.compile(r"-?[0-9]{1,18}")
#: An ``ALLOWED_HOSTS`` name: ``name``, ``.suffix`` or ``*.suffix`` (DNS characters, no port,
#: no scheme).
_HOST_ENTRY_RE = re.compile(r"(?:\*?\.)?[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?")
DEFAULT_SQLITE_URL = "sqlite:///./fetcher-data/fetcher.db"
#: §15.1: the reason of the refusal of an unauthenticated production API (exact).
OPEN_PRODUCTION_API = (
    "AUTH_MODE=none on a non-loopback address with ENV_NAME=production "
    "requires AUTH_NONE_ACKNOWLEDGED=true"
)


class StartupRefused(Exception):
    """A §9.3 refusal; ``reason`` is the exact text after ``startup refused: ``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Mode(StrEnum):
    MANAGER = "manager"
    WORKER = "worker"
    EMBEDDED = "embedded"


@dataclass(frozen=True, slots=True)
class RabbitSettings:
    host: str
    port: int = 5672
    user: str = "guest"
    password: str = field(default="guest", repr=False)
    vhost: str = "/"
    tls: bool = False
    work_queue: str = "fetcher.extract-external-data.queue"
    events_exchange: str = ""


@dataclass(frozen=True, slots=True)
class ObjectStorageSettings:
    endpoint: str | None
    bucket: str = ""
    region: str = "us-east-1"
    key_prefix: str = ""
    access_key_id: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    path_style: bool = False
    local_dir: str = "./fetcher-data/objects"


@dataclass(frozen=True, slots=True)
class Settings:
    mode: Mode
    keys: KeySet = field(repr=False)
    key_version: str
    previous_keys: Mapping[str, KeySet] = field(repr=False)
    database_url: str = field(repr=False)
    rabbitmq: RabbitSettings | None
    object_storage: ObjectStorageSettings
    log_level: str = "info"
    env_name: str = "development"
    deployment_mode: str = "local"
    ssrf_guard: bool = False
    cors_origins: tuple[str, ...] = ()
    #: ``ALLOWED_HOSTS`` (issue 33): ``Host`` names served besides IP literals, ``localhost``
    #: and the ``SERVER_ADDRESS`` host (``fetcher.services.api.request_origin``).
    allowed_hosts: tuple[str, ...] = ()
    http_max_connections: int = 1000
    sqlite_allowed_dir: str | None = None
    server_host: str = ""
    server_port: int = 4006
    health_port: int = 4007
    readyz_drain_delay: int = 12
    max_pagination_limit: int = 100
    schema_cache_ttl: int = 300
    engine_max_result_bytes: int | None = None
    workers: int = 5
    pending_timeout: int = 3600
    storage_timeout: int = 120
    spool_memory_bytes: int = 8 * 1024 * 1024
    #: ``ENCODER_PROCESS_ENABLED`` (not in the contract): encode result batches in a second
    #: process (issue 12). Default on in embedded mode, off in the Worker.
    encoder_process: bool = False
    ce_source: str = ""
    events_exchange: str = ""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    internal_datasources: Mapping[str, ConnectionDescriptor] = field(default_factory=dict)
    #: §12.5 ``DATASOURCE_<NAME>_TENANTS`` by configName (empty in single-tenant mode).
    internal_tenants: Mapping[str, frozenset[str]] = field(default_factory=dict)
    auth: AuthSettings = field(default_factory=AuthSettings)
    #: §12.5 ``MULTI_TENANT_ENABLED``.
    multi_tenant: bool = False
    #: ``TRACING_ENABLED`` and ``OTEL_*`` (issue 22, docs/tracing.md).
    tracing: TracingSettings = field(default_factory=TracingSettings)
    #: ``ACCESS_LOG`` (issue 22): one info line per Manager HTTP request; default on.
    access_log: bool = True
    #: §15.3 ``TRACE_URL_TEMPLATE``: the console's link to a job's trace (Manager, embedded).
    trace_url_template: str | None = None

    @property
    def sqlite_path(self) -> str | None:
        """The metadata store file for a ``sqlite://`` URL (absolute), else ``None``."""
        return sqlite_store_path(self.database_url)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        return _Reader(os.environ if env is None else env).settings()


class _Reader:
    """Reads and validates variables in the §9.3 order."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def get(self, name: str, default: str = "") -> str:
        value = self.env.get(name, "").strip()
        return value if value else default

    def integer(self, name: str, default: int, *, minimum: int | None = None) -> int:
        raw = self.get(name)
        if not raw:
            return default
        if not _INT_RE.fullmatch(raw) or (minimum is not None and int(raw) < minimum):
            raise StartupRefused(f"invalid value for {name}")
        return int(raw)

    def boolean(self, name: str, default: bool = False) -> bool:
        raw = self.get(name).lower()
        if not raw:
            return default
        if raw not in ("true", "false"):
            raise StartupRefused(f"invalid value for {name}")
        return raw == "true"

    def settings(self) -> Settings:
        mode = self._mode()
        keys, previous, secrets = self._keys()
        multi_tenant = self.boolean("MULTI_TENANT_ENABLED")
        auth = self._auth(mode, multi_tenant)
        if auth.jwt_secret is not None:
            secrets += (self.get("AUTH_JWT_SECRET"),)
        database_url = self._database_url(mode)
        rabbit = self._rabbit(mode)
        ce_source, exchange = self._events(mode, rabbit)
        storage = self._object_storage(mode)
        host, port = self._server_address()
        self._refuse_open_production_api(mode, auth, host)
        internal = self._internal_datasources(mode, database_url)
        internal_tenants = self._internal_tenants(multi_tenant)
        tracing = self._tracing(mode)
        secrets += _connection_secrets(database_url, rabbit, storage, tracing)
        return Settings(
            mode=mode,
            keys=keys,
            key_version=self._key_version(),
            previous_keys=previous,
            database_url=database_url,
            rabbitmq=rabbit,
            object_storage=storage,
            log_level=self.get("LOG_LEVEL", "info").lower(),
            env_name=self.get("ENV_NAME", "development"),
            deployment_mode=self.get("DEPLOYMENT_MODE", "local"),
            ssrf_guard=self.boolean("SSRF_GUARD_ENABLED"),
            cors_origins=tuple(
                o.strip() for o in self.get("CORS_ALLOWED_ORIGINS").split(",") if o.strip()
            ),
            allowed_hosts=self._allowed_hosts(),
            http_max_connections=self._http_max_connections(mode),
            sqlite_allowed_dir=self.get("SQLITE_ALLOWED_DIR") or None,
            server_host=host,
            server_port=port,
            health_port=self.integer("HEALTH_PORT", 4007, minimum=0),
            readyz_drain_delay=max(1, self.integer("READYZ_DRAIN_DELAY_SEC", 12)),
            max_pagination_limit=self.integer("MAX_PAGINATION_LIMIT", 100, minimum=1),
            schema_cache_ttl=self.integer("SCHEMA_CACHE_TTL_SECONDS", 300, minimum=0),
            engine_max_result_bytes=self.integer("ENGINE_MAX_RESULT_BYTES", 0) or None,
            workers=self.integer("RABBITMQ_NUMBERS_OF_WORKERS", 5, minimum=1),
            pending_timeout=self.integer("PENDING_TIMEOUT_SECONDS", 3600, minimum=300),
            storage_timeout=self.integer("STORAGE_TIMEOUT_SECONDS", 120, minimum=1),
            spool_memory_bytes=self.integer("SPOOL_MEMORY_BYTES", 8 * 1024 * 1024, minimum=0),
            encoder_process=self.boolean("ENCODER_PROCESS_ENABLED", mode is Mode.EMBEDDED),
            ce_source=ce_source,
            events_exchange=exchange,
            secrets=secrets + tuple(s for d in internal.values() for s in d.secrets()),
            internal_datasources=internal,
            internal_tenants=internal_tenants,
            auth=auth,
            multi_tenant=multi_tenant,
            tracing=tracing,
            access_log=self.boolean("ACCESS_LOG", True),
            trace_url_template=self._trace_url_template(mode),
        )

    def _trace_url_template(self, mode: Mode) -> str | None:
        """§15.3: read by the modes that serve the console; a malformed one refuses the start."""
        raw = self.get("TRACE_URL_TEMPLATE") if mode is not Mode.WORKER else ""
        if raw and not valid_trace_url_template(raw):
            raise StartupRefused("invalid value for TRACE_URL_TEMPLATE")
        return raw or None

    def _tracing(self, mode: Mode) -> TracingSettings:
        """Issue 22: ``TRACING_ENABLED`` and ``OTEL_*``; a malformed value refuses the start."""
        try:
            return read_tracing_settings(self.env, mode=mode.value)
        except TracingSettingRefused as exc:
            raise StartupRefused(str(exc)) from None

    def _auth(self, mode: Mode, multi_tenant: bool) -> AuthSettings:
        """§9.3 rows 3–5 (the Manager and embedded mode; the Worker verifies no tokens)."""
        if mode is Mode.WORKER:
            return AuthSettings()
        try:
            auth_mode = AuthMode(self.get("AUTH_MODE", "none").lower())
        except ValueError:
            auth_mode = None
        if multi_tenant and auth_mode is not AuthMode.JWT:
            raise StartupRefused("MULTI_TENANT_ENABLED=true requires AUTH_MODE=jwt")
        if auth_mode is None:
            raise StartupRefused("AUTH_MODE must be one of none, jwt")
        if auth_mode is AuthMode.NONE:
            return AuthSettings()
        issuer = self.get("AUTH_ISSUER")
        jwks_url, secret = self.get("AUTH_JWKS_URL"), self.get("AUTH_JWT_SECRET")
        if not issuer:
            raise StartupRefused("invalid authentication settings: AUTH_ISSUER is required")
        if bool(jwks_url) == bool(secret):
            raise StartupRefused(
                "invalid authentication settings: "
                "set exactly one of AUTH_JWKS_URL and AUTH_JWT_SECRET"
            )
        if jwks_url and not jwks_url_ok(jwks_url):
            raise StartupRefused("invalid authentication settings: malformed AUTH_JWKS_URL")
        key = hs256_key(secret) if secret else None
        if secret and key is None:
            raise StartupRefused(
                "invalid authentication settings: AUTH_JWT_SECRET must be standard base64 "
                "of at least 32 bytes"
            )
        leeway = self.integer("AUTH_LEEWAY_SECONDS", 30, minimum=0)
        if leeway > 300:
            raise StartupRefused("invalid value for AUTH_LEEWAY_SECONDS")
        return AuthSettings(
            mode=auth_mode,
            issuer=issuer,
            audience=self.get("AUTH_AUDIENCE", "fetcher"),
            jwks_url=jwks_url or None,
            jwt_secret=key,
            jwks_refresh_seconds=self.integer("AUTH_JWKS_REFRESH_SECONDS", 300, minimum=30),
            leeway_seconds=leeway,
            tenant_claim=self.get("AUTH_TENANT_CLAIM", "tenantId"),
        )

    def _refuse_open_production_api(self, mode: Mode, auth: AuthSettings, host: str) -> None:
        """§15.1: an API without authentication on a non-loopback listener (an empty host is
        every interface) is refused when ``ENV_NAME`` is ``production``, unless
        ``AUTH_NONE_ACKNOWLEDGED=true`` says the operator means it (an authenticating proxy in
        front, say). Elsewhere §12.1's warn line stands alone. The Worker serves no API."""
        if mode is Mode.WORKER:
            return
        acknowledged = self.boolean("AUTH_NONE_ACKNOWLEDGED")
        if auth.enabled or is_loopback(host.lower()) or acknowledged:
            return
        if self.get("ENV_NAME").lower() == "production":
            raise StartupRefused(OPEN_PRODUCTION_API)

    def _http_max_connections(self, mode: Mode) -> int:
        """§9.1: requests in flight at once (§13), read by the Manager and embedded mode only;
        the Worker's health server has no such limit and ignores the variable."""
        if mode is Mode.WORKER:
            return 1000
        return self.integer("HTTP_MAX_CONNECTIONS", 1000, minimum=1)

    def _internal_datasources(
        self, mode: Mode, database_url: str
    ) -> dict[str, ConnectionDescriptor]:
        """§9.4 ``DATASOURCE_<NAME>_*``; an invalid definition refuses startup."""
        try:
            return parse_internal_datasources(
                self.env,
                embedded=mode is Mode.EMBEDDED,
                metadata_store_path=sqlite_store_path(database_url),
            )
        except ValueError as exc:
            raise StartupRefused(str(exc)) from None

    def _internal_tenants(self, multi_tenant: bool) -> dict[str, frozenset[str]]:
        """§9.4 ``DATASOURCE_<NAME>_TENANTS`` (multi-tenant mode only); invalid → refusal."""
        try:
            return parse_internal_tenants(self.env, multi_tenant=multi_tenant)
        except ValueError as exc:
            raise StartupRefused(str(exc)) from None

    def _mode(self) -> Mode:
        try:
            return Mode(self.get("FETCHER_MODE"))
        except ValueError:
            raise StartupRefused("FETCHER_MODE must be one of manager, worker, embedded") from None

    def _keys(self) -> tuple[KeySet, dict[str, KeySet], tuple[str, ...]]:
        raw = self.get("APP_ENC_KEY")
        try:
            keys = KeySet.from_master(parse_master_key(raw or None))
        except MasterKeyError as exc:
            raise StartupRefused(exc.reason) from None
        previous: dict[str, KeySet] = {}
        secrets = [raw]
        for entry in filter(None, (e.strip() for e in self.get("APP_ENC_KEY_PREVIOUS").split(","))):
            version, _, key = entry.partition(":")
            if not _VERSION_RE.fullmatch(version) or version == self._key_version():
                raise StartupRefused("invalid value for APP_ENC_KEY_PREVIOUS")
            try:
                previous[version] = KeySet.from_master(parse_master_key(key))
            except MasterKeyError:
                raise StartupRefused("invalid value for APP_ENC_KEY_PREVIOUS") from None
            secrets.append(key.strip())
        return keys, previous, tuple(secrets)

    def _key_version(self) -> str:
        version = self.get("APP_ENC_KEY_VERSION", "1")
        if not _VERSION_RE.fullmatch(version):
            raise StartupRefused("invalid value for APP_ENC_KEY_VERSION")
        return version

    def _database_url(self, mode: Mode) -> str:
        url = self.get("DATABASE_URL")
        if not url and mode is Mode.EMBEDDED:
            url = DEFAULT_SQLITE_URL
        scheme = url.partition("://")[0].lower() if "://" in url else ""
        if url and scheme not in ("postgresql", "postgres", "sqlite"):
            raise StartupRefused("unsupported DATABASE_URL scheme")
        if mode is not Mode.EMBEDDED and scheme not in ("postgresql", "postgres"):
            raise StartupRefused("DATABASE_URL must be a postgresql:// URL")
        return url

    def _rabbit(self, mode: Mode) -> RabbitSettings | None:
        host = self.get("RABBITMQ_HOST")
        if not host:
            if mode is Mode.EMBEDDED:
                return None
            raise StartupRefused("RABBITMQ_HOST is required")
        return RabbitSettings(
            host=host,
            port=self.integer("RABBITMQ_PORT_AMQP", 5672, minimum=1),
            user=self.get("RABBITMQ_DEFAULT_USER", "guest"),
            password=self.env.get("RABBITMQ_DEFAULT_PASS", "guest") or "guest",
            vhost=self.get("RABBITMQ_VHOST", "/"),
            tls=self.boolean("RABBITMQ_TLS") or self.get("RABBITMQ_URI", "amqp") == "amqps",
            work_queue=self.get(
                "RABBITMQ_FETCHER_WORK_QUEUE", "fetcher.extract-external-data.queue"
            ),
            events_exchange=self.get("RABBITMQ_JOB_EVENTS_EXCHANGE"),
        )

    def _events(self, mode: Mode, rabbit: RabbitSettings | None) -> tuple[str, str]:
        """§9.3: the Worker (and embedded mode with a broker) needs streaming settings."""
        needs_events = mode is Mode.WORKER or (mode is Mode.EMBEDDED and rabbit is not None)
        if mode is Mode.WORKER and self.get("STREAMING_ENABLED").lower() != "true":
            raise StartupRefused("STREAMING_ENABLED must be true")
        exchange = self.get("RABBITMQ_JOB_EVENTS_EXCHANGE")
        source = self.get("STREAMING_CLOUDEVENTS_SOURCE")
        if needs_events and not exchange:
            raise StartupRefused("RABBITMQ_JOB_EVENTS_EXCHANGE is required")
        if needs_events and not source:
            raise StartupRefused("STREAMING_CLOUDEVENTS_SOURCE is required")
        return source or "//lerian.fetcher/embedded", exchange or "fetcher.job.events"

    def _object_storage(self, mode: Mode) -> ObjectStorageSettings:
        endpoint = self.get("OBJECT_STORAGE_ENDPOINT") or None
        bucket = self.get("OBJECT_STORAGE_BUCKET")
        # ``OBJECT_STORAGE_LOCAL_WORKER`` (not in the contract, issue 23): an explicit opt-in
        # for a Worker to store results in the local directory, for one host and benchmarks
        # (Workers on other hosts would not share it). Without it the §9.3 refusal stands.
        if self.boolean("OBJECT_STORAGE_LOCAL_WORKER") and mode is Mode.WORKER:
            if endpoint is not None or bucket:
                raise StartupRefused(
                    "OBJECT_STORAGE_LOCAL_WORKER=true excludes "
                    "OBJECT_STORAGE_ENDPOINT and OBJECT_STORAGE_BUCKET"
                )
            if not self.get("OBJECT_STORAGE_LOCAL_DIR"):
                raise StartupRefused(
                    "OBJECT_STORAGE_LOCAL_WORKER=true requires OBJECT_STORAGE_LOCAL_DIR"
                )
        elif mode is Mode.WORKER and (endpoint is None or not bucket):
            raise StartupRefused("object storage is not configured")
        if mode is Mode.EMBEDDED and endpoint is not None and not bucket:
            raise StartupRefused("object storage is not configured")
        return ObjectStorageSettings(
            endpoint=endpoint,
            bucket=bucket,
            region=self.get("OBJECT_STORAGE_REGION", "us-east-1"),
            key_prefix=self.get("OBJECT_STORAGE_KEY_PREFIX").strip("/"),
            access_key_id=self.get("OBJECT_STORAGE_ACCESS_KEY_ID") or None,
            secret_key=self.get("OBJECT_STORAGE_SECRET_KEY") or None,
            path_style=self.boolean("OBJECT_STORAGE_USE_PATH_STYLE"),
            local_dir=self.get("OBJECT_STORAGE_LOCAL_DIR", "./fetcher-data/objects"),
        )

    def _allowed_hosts(self) -> tuple[str, ...]:
        """``ALLOWED_HOSTS``: ``*``, a DNS name, ``.suffix`` (or ``*.suffix``) or an IP literal,
        comma-separated (no scheme, no port); anything else refuses the start."""
        entries = tuple(e.strip() for e in self.get("ALLOWED_HOSTS").split(",") if e.strip())
        for entry in entries:
            if entry != "*" and not _HOST_ENTRY_RE.fullmatch(entry) and not _is_ip(entry):
                raise StartupRefused("invalid value for ALLOWED_HOSTS")
        return entries

    def _server_address(self) -> tuple[str, int]:
        raw = self.get("SERVER_ADDRESS", ":4006")
        host, sep, port = raw.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise StartupRefused("invalid value for SERVER_ADDRESS")
        return host.strip("[]"), int(port)


def sqlite_store_path(database_url: str) -> str | None:
    """The absolute file of a ``sqlite:///relative.db`` or ``sqlite:////abs.db`` URL."""
    if not database_url.startswith("sqlite:"):
        return None
    return str(Path(database_url.removeprefix("sqlite:///")).resolve())


def _connection_secrets(
    database_url: str,
    rabbit: RabbitSettings | None,
    storage: ObjectStorageSettings,
    tracing: TracingSettings,
) -> tuple[str, ...]:
    """The passwords and keys of the process's own connections (§9.2: never logged), the
    OTLP exporter's header values included (a collector token, issue 22)."""
    found = (
        _url_password(database_url),
        rabbit.password if rabbit else None,
        storage.secret_key,
        *tracing.headers.values(),
    )
    return tuple(s for s in found if s)


def _url_password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
