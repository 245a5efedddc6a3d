"""Internal datasources configured through ``DATASOURCE_<NAME>_*`` (contract §9.4).

:func:`parse_internal_datasources` reads an environment mapping once at startup and returns
``{configName: ConnectionDescriptor}`` with ``internal=True`` and the deterministic ID
UUIDv5(``f47ac10b-58cc-4372-a567-0e02b2c3d479``, ``"/" + configName``). ``<NAME>`` is any
``[A-Z0-9_]+`` token, found by matching the longest known suffix; a definition exists when
``DATASOURCE_<NAME>_CONFIG_NAME`` is set, and variables of a ``<NAME>`` without it are ignored
with a WARN. Any violation raises ``ValueError("invalid internal datasource <NAME>: <problem>")``,
which the caller turns into the §9.3 startup refusal. Problems never quote a password or key.

Multi-tenant mode (§12.5): ``DATASOURCE_<NAME>_TENANTS`` names the tenants that see a
definition (:func:`parse_internal_tenants`; ignored in single-tenant mode). A tenant sees it
under the ID UUIDv5(namespace, ``<tenantId> + "/" + configName``) (:func:`visible_internal`);
the tenant ``""`` of single-tenant mode sees every definition under the §9.4 ID.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from urllib.parse import parse_qsl

from fetcher.crypto import TENANT_PATTERN_TEXT, is_tenant_id
from fetcher.engine import ConnectionDescriptor
from fetcher.engine.kit import EngineType, TlsSettings
from fetcher.services.api.shapes import (
    CONFIG_NAME,
    RESERVED_METADATA,
    RESERVED_VALUE,
    SSL_MODES,
    TYPES,
    Field,
    Invalid,
    is_valid_host,
)

__all__ = [
    "INTERNAL_NAMESPACE",
    "SUFFIXES",
    "internal_connection_id",
    "parse_internal_datasources",
    "parse_internal_tenants",
    "visible_internal",
]

log = logging.getLogger(__name__)

#: §9.4 namespace of the internal datasource IDs.
INTERNAL_NAMESPACE = uuid.UUID("f47ac10b-58cc-4372-a567-0e02b2c3d479")
#: §9.4 known suffixes.
SUFFIXES = (
    "CONFIG_NAME",
    "TYPE",
    "HOST",
    "PORT",
    "DATABASE",
    "USER",
    "PASSWORD",
    "SCHEMA",
    "SSLMODE",
    "SSL_CA",
    "SSL_CERT",
    "SSL_KEY",
    "OPTIONS",
    "TENANTS",
)
#: §12.5 "the tenant pattern" (always applied with ``fullmatch``).
_PREFIX = "DATASOURCE_"
_NAME = re.compile(r"[A-Z0-9_]+")
_DEFAULT_PORTS: Mapping[EngineType, int] = {
    EngineType.POSTGRESQL: 5432,
    EngineType.MYSQL: 3306,
    EngineType.SQL_SERVER: 1433,
    EngineType.ORACLE: 1521,
    EngineType.MONGODB: 27017,
}
_DB_FORBIDDEN = frozenset("?#;=/\x00")


def internal_connection_id(config_name: str, tenant: str = "") -> str:
    """§9.4 / §12.5: UUIDv5 of ``<tenant> + "/" + configName`` in :data:`INTERNAL_NAMESPACE`
    (``"/" + configName`` for the single tenant ``""``)."""
    return str(uuid.uuid5(INTERNAL_NAMESPACE, tenant + "/" + config_name))


def visible_internal(
    internal: Mapping[str, ConnectionDescriptor],
    tenants: Mapping[str, frozenset[str]],
    tenant: str,
) -> dict[str, ConnectionDescriptor]:
    """The internal datasources ``tenant`` sees (§12.5), each under that tenant's ID.

    ``tenants`` maps a configName to its ``DATASOURCE_<NAME>_TENANTS``; a definition without
    them is visible to no tenant. The single tenant ``""`` sees every definition as parsed."""
    if tenant == "":
        return dict(internal)
    return {
        name: replace(descriptor, connection_id=internal_connection_id(name, tenant))
        for name, descriptor in internal.items()
        if tenant in tenants.get(name, frozenset())
    }


def parse_internal_tenants(
    env: Mapping[str, str], *, multi_tenant: bool
) -> dict[str, frozenset[str]]:
    """``{configName: tenants}`` from ``DATASOURCE_<NAME>_TENANTS`` (§9.4, §12.5).

    Empty in single-tenant mode, where the variable is ignored. Each comma-separated item is
    trimmed and must match the tenant pattern (``fetcher.crypto.is_tenant_id``); otherwise
    ``ValueError("invalid internal datasource <NAME>: TENANTS …")``, the caller's startup
    refusal."""
    if not multi_tenant:
        return {}
    result: dict[str, frozenset[str]] = {}
    for name, values in sorted(_group(env).items()):
        config_name = (values.get("CONFIG_NAME") or "").strip()
        raw = values.get("TENANTS")
        if not config_name or raw is None or not raw.strip():
            continue
        items = [item.strip() for item in raw.split(",")]
        if not all(is_tenant_id(item) for item in items):
            raise ValueError(
                f"invalid internal datasource {name}: TENANTS must be comma-separated tenant IDs"
                f" matching {TENANT_PATTERN_TEXT}"
            )
        result[config_name] = frozenset(items)
    return result


def _exactly(field: Field[str], value: str) -> bool:
    """``value`` passes the API's rule for ``field`` as it is (settings are not trimmed)."""
    try:
        return field.check(value) == value
    except Invalid:
        return False


class _Problem(Exception):
    """One §9.4 violation; the caller adds ``invalid internal datasource <NAME>: ``."""


def _split(variable: str) -> tuple[str, str] | None:
    """``DATASOURCE_<NAME>_<SUFFIX>`` → ``(NAME, SUFFIX)`` by the longest known suffix."""
    if not variable.startswith(_PREFIX):
        return None
    rest = variable[len(_PREFIX) :]
    matches = [s for s in SUFFIXES if rest.endswith("_" + s) and len(rest) > len(s) + 1]
    if not matches:
        return None
    suffix = max(matches, key=len)
    name = rest[: -(len(suffix) + 1)]
    return (name, suffix) if _NAME.fullmatch(name) else None


def _group(env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    groups: dict[str, dict[str, str]] = {}
    for variable, value in env.items():
        split = _split(variable)
        if split is not None:
            groups.setdefault(split[0], {})[split[1]] = value
    return groups


def parse_internal_datasources(
    env: Mapping[str, str], *, embedded: bool, metadata_store_path: str | None = None
) -> dict[str, ConnectionDescriptor]:
    """Parse every ``DATASOURCE_<NAME>_*`` definition of ``env`` (§9.4), sorted by NAME."""
    result: dict[str, ConnectionDescriptor] = {}
    for name, values in sorted(_group(env).items()):
        if "CONFIG_NAME" not in values:
            log.warning(
                "ignoring DATASOURCE_%s_* variables: no DATASOURCE_%s_CONFIG_NAME", name, name
            )
            continue
        try:
            descriptor = _Definition(values, embedded, metadata_store_path).descriptor()
            if descriptor.config_name in result:
                raise _Problem(f"CONFIG_NAME '{descriptor.config_name}' is already used")
        except _Problem as exc:
            raise ValueError(f"invalid internal datasource {name}: {exc}") from None
        result[descriptor.config_name] = descriptor
    return result


@dataclass(frozen=True, slots=True)
class _Definition:
    values: Mapping[str, str]
    embedded: bool
    metadata_store_path: str | None

    def get(self, suffix: str) -> str | None:
        value = self.values.get(suffix)
        if value is None or not value.strip():
            return None
        return value if suffix in ("PASSWORD", "SSL_CA", "SSL_CERT", "SSL_KEY") else value.strip()

    def require(self, suffix: str) -> str:
        value = self.get(suffix)
        if value is None:
            raise _Problem(f"{suffix} is required")
        return value

    def descriptor(self) -> ConnectionDescriptor:
        config_name = self.require("CONFIG_NAME")
        if not _exactly(CONFIG_NAME, config_name):
            raise _Problem(
                "CONFIG_NAME must be 3 to 100 characters: alphanumerics, underscores, hyphens"
            )
        kind = self._type()
        database = self._database(kind)
        metadata = self._options(kind)
        if kind is EngineType.SQLITE:
            self._reject_for_sqlite()
            return ConnectionDescriptor(
                config_name=config_name,
                type=kind,
                database=database,
                metadata=metadata,
                internal=True,
                connection_id=internal_connection_id(config_name),
            )
        username, password = self._credentials(kind)
        return ConnectionDescriptor(
            config_name=config_name,
            type=kind,
            host=self._host(),
            port=self._port(kind),
            database=database,
            schema=self._schema(kind),
            username=username,
            password=password,
            ssl=self._tls(kind),
            metadata=metadata,
            internal=True,
            connection_id=internal_connection_id(config_name),
        )

    def _credentials(self, kind: EngineType) -> tuple[str | None, str | None]:
        """``USER`` and ``PASSWORD``: required, except on mongodb where they are optional
        together (§9.4, §2.5); exactly one of them there → the other is required."""
        if kind is EngineType.MONGODB and self.get("USER") is None and self.get("PASSWORD") is None:
            return None, None
        return self.require("USER"), self.require("PASSWORD")

    def _type(self) -> EngineType:
        raw = self.require("TYPE").upper()
        try:
            kind = EngineType(raw)
        except ValueError:
            raise _Problem(
                "TYPE must be one of postgresql, mysql, sql_server, oracle, mongodb, sqlite"
            ) from None
        if kind is EngineType.SQLITE and not self.embedded:
            raise _Problem("TYPE sqlite is allowed in embedded mode only")
        return kind

    def _host(self) -> str:
        host = self.require("HOST")
        if not is_valid_host(host):
            raise _Problem("HOST must be a valid hostname or IP address")
        return host

    def _port(self, kind: EngineType) -> int:
        raw = self.get("PORT")
        if raw is None:
            return _DEFAULT_PORTS[kind]
        if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= 65535:
            raise _Problem("PORT must be an integer between 1 and 65535")
        return int(raw)

    def _database(self, kind: EngineType) -> str:
        database = self.require("DATABASE")
        if kind is EngineType.SQLITE:
            if "\x00" in database or _same_file(database, self.metadata_store_path):
                raise _Problem("DATABASE must be a SQLite file other than the metadata store")
            return database
        if len(database) > 255 or any(
            c in _DB_FORBIDDEN or (c.isspace() and c != " ") for c in database
        ):
            raise _Problem("DATABASE contains invalid characters")
        return database

    def _schema(self, kind: EngineType) -> str | None:
        schema = self.get("SCHEMA")
        if schema is not None and (not TYPES[kind.value].schema or len(schema) > 128):
            raise _Problem(f"SCHEMA is not supported for type {kind.value} or is too long")
        return schema

    def _tls(self, kind: EngineType) -> TlsSettings | None:
        mode = self.get("SSLMODE") or ""
        if mode and mode not in SSL_MODES[kind.value]:
            raise _Problem(f"SSLMODE must be one of [{' '.join(SSL_MODES[kind.value])}]")
        pem = {s: self.get(s) for s in ("SSL_CA", "SSL_CERT", "SSL_KEY")}
        for suffix, value in pem.items():
            if value is not None and not value.startswith("-----BEGIN"):
                raise _Problem(f"{suffix} must be PEM text")
        if (pem["SSL_CERT"] is None) != (pem["SSL_KEY"] is None):
            raise _Problem("SSL_CERT and SSL_KEY must be provided together")
        if not mode and not any(pem.values()):
            return None
        return TlsSettings(mode, pem["SSL_CA"], pem["SSL_CERT"], pem["SSL_KEY"])

    def _options(self, kind: EngineType) -> dict[str, object]:
        raw = self.get("OPTIONS")
        try:
            pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=True) if raw else []
        except ValueError:
            raise _Problem("OPTIONS must be k=v pairs joined with &") from None
        metadata: dict[str, object] = dict(pairs)
        for key in RESERVED_METADATA:
            value = metadata.get(key)
            if value is not None and not _exactly(RESERVED_VALUE, str(value)):
                raise _Problem(f"OPTIONS {key} contains invalid characters")
        if kind is EngineType.ORACLE and not metadata.get("serviceName"):
            raise _Problem("OPTIONS serviceName is required for oracle")
        return metadata

    def _reject_for_sqlite(self) -> None:
        for suffix in ("HOST", "PORT", "USER", "PASSWORD", "SCHEMA", "SSLMODE", "SSL_CA"):
            if self.get(suffix) is not None:
                raise _Problem(f"{suffix} is not supported for type sqlite")
        if self.get("SSL_CERT") is not None or self.get("SSL_KEY") is not None:
            raise _Problem("SSL_CERT and SSL_KEY are not supported for type sqlite")


def _same_file(path: str, metadata_store_path: str | None) -> bool:
    """§2.5.1: the metadata store's own file is always rejected (by path or inode)."""
    if not metadata_store_path:
        return False
    if os.path.realpath(path) == os.path.realpath(metadata_store_path):
        return True
    try:
        a, b = os.stat(path), os.stat(metadata_store_path)
    except (OSError, ValueError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
