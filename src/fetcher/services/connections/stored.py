"""Stored connection records and what is made of them (contract §2.5, §2.6.5, §6.4).

Pure functions over :class:`ConnectionRecord`: the §2.5 response bodies, the decrypted
descriptor of one use, and the record a create or PATCH writes (secrets encrypted only when
sent, re-keyed when the key version changes, credential re-targeting refused). No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from fetcher.engine import ConnectionDescriptor
from fetcher.engine.kit import EngineType, TlsSettings
from fetcher.services.api.response_models import ConnectionResponse, shape
from fetcher.services.connections.credentials import CredentialCipher, CredentialError
from fetcher.services.connections.internal_datasources import internal_connection_id
from fetcher.services.connections.validation import ConnectionInput, SslInput
from fetcher.services.errors import retarget_needs_password
from fetcher.services.records import ConnectionRecord
from fetcher.services.timeutil import format_ms

__all__ = [
    "check_retarget",
    "connection_response",
    "descriptor_from_record",
    "internal_response",
    "merged_record",
    "stored_input",
]

_SQLITE = EngineType.SQLITE.value


def connection_response(record: ConnectionRecord) -> dict[str, object]:
    """§2.5 ConnectionResponse: empty optional members omitted; secrets never returned."""
    network = record.type != _SQLITE
    has_ssl = record.ssl_mode or record.ssl_ca or record.ssl_cert or record.ssl_key_encrypted
    return shape(
        ConnectionResponse,
        {
            "id": record.id,
            "productName": record.product_name or None,
            "configName": record.config_name,
            "type": record.type,
            "host": record.host if network else None,
            "port": record.port if network else None,
            "databaseName": record.database_name,
            "schema": record.schema or None,
            "userName": record.user_name if network else None,
            "ssl": {"mode": record.ssl_mode or ""} if has_ssl else None,
            "metadata": dict(record.metadata) or None,
            "internal": False,
            "createdAt": format_ms(record.created_at),
            "updatedAt": format_ms(record.updated_at),
            "createdBy": record.created_by,
            "truncated": list(record.cut) or None,
        },
    )


def internal_response(descriptor: ConnectionDescriptor) -> dict[str, object]:
    """§2.5/§9.4: an internal datasource, without ``host``, ``port`` and timestamps."""
    return shape(
        ConnectionResponse,
        {
            "id": descriptor.connection_id or internal_connection_id(descriptor.config_name),
            "configName": descriptor.config_name,
            "type": descriptor.type.value,
            "databaseName": descriptor.database,
            "schema": descriptor.schema or None,
            "userName": (
                descriptor.username or None if descriptor.type is not EngineType.SQLITE else None
            ),
            "ssl": {"mode": descriptor.ssl.mode} if descriptor.ssl is not None else None,
            "metadata": dict(descriptor.metadata) or None,
            "internal": True,
        },
    )


def descriptor_from_record(
    record: ConnectionRecord, cipher: CredentialCipher, *, config_name: str | None = None
) -> ConnectionDescriptor:
    """Decrypt a stored connection for one use. Raises :class:`CredentialError`."""
    version = record.encryption_key_version
    password = (
        cipher.decrypt(record.password_encrypted, record.id, version)
        if record.password_encrypted
        else None
    )
    ssl_key = (
        cipher.decrypt(record.ssl_key_encrypted, record.id, version)
        if record.ssl_key_encrypted
        else None
    )
    tls = None
    if record.ssl_mode or record.ssl_ca or record.ssl_cert or ssl_key:
        tls = TlsSettings(record.ssl_mode or "", record.ssl_ca, record.ssl_cert, ssl_key)
    return ConnectionDescriptor(
        config_name=config_name or record.config_name,
        type=EngineType(record.type),
        host=record.host,
        port=record.port,
        database=record.database_name,
        schema=record.schema,
        username=record.user_name,
        password=password,
        ssl=tls,
        metadata=dict(record.metadata),
        connection_id=record.id,
    )


#: The fields a validated input and a stored record share, name for name and value for value:
#: read from the record as a PATCH base (:func:`stored_input`), written back by create and
#: PATCH (:func:`merged_record`).
_PLAIN_FIELDS = ("config_name", "type", "host", "port", "database_name", "schema", "user_name")


def _plain_fields(source: ConnectionRecord | ConnectionInput) -> dict[str, Any]:
    return {name: getattr(source, name) for name in _PLAIN_FIELDS}


def stored_input(record: ConnectionRecord) -> ConnectionInput:
    """The stored record as a PATCH base; secrets are kept out (never re-validated)."""
    ssl = None
    if record.ssl_mode or record.ssl_ca or record.ssl_cert or record.ssl_key_encrypted:
        ssl = SslInput(record.ssl_mode or "", record.ssl_ca, record.ssl_cert)
    return ConnectionInput(**_plain_fields(record), ssl=ssl, metadata=dict(record.metadata))


def check_retarget(
    record: ConnectionRecord, data: ConnectionInput, body: Mapping[str, object]
) -> None:
    """§2.6.5 step 7a: a kept stored password never follows a new host, port, engine or TLS
    setting unless the caller sends it again (§13 "Credential re-targeting").

    The rule guards the stored password, so it applies only when the merged record would keep
    one: not when the merged type is SQLITE or a MONGODB PATCH removes the credentials (both
    drop the stored password, see :func:`_patched_secrets`).
    """
    if not record.password_encrypted or data.type == _SQLITE or data.user_name is None:
        return
    retargeted = (
        data.host != record.host
        or data.port != record.port
        or data.type != record.type
        or "ssl" in body
    )
    sent = body.get("password")
    if retargeted and not (isinstance(sent, str) and sent):
        raise retarget_needs_password()


def merged_record(
    record: ConnectionRecord,
    data: ConnectionInput,
    body: Mapping[str, object],
    now: datetime,
    cipher: CredentialCipher,
) -> ConnectionRecord:
    """``record`` with ``data`` applied: secrets encrypted only when sent (kept ones stay,
    re-keyed with a version change); SQLITE clears credentials; ``ssl`` replaced only when
    sent. A create applies its input to an empty record, so both write the same fields."""
    password, ssl_key, version = _patched_secrets(record, data, body, cipher)
    ssl_sent = "ssl" in body
    ssl = data.ssl
    return replace(
        record,
        **_plain_fields(data),
        password_encrypted=password,
        ssl_mode=(ssl.mode if ssl else None) if ssl_sent else record.ssl_mode,
        ssl_ca=(ssl.ca if ssl else None) if ssl_sent else record.ssl_ca,
        ssl_cert=(ssl.cert if ssl else None) if ssl_sent else record.ssl_cert,
        ssl_key_encrypted=ssl_key,
        encryption_key_version=version,
        metadata=dict(data.metadata),  # type: ignore[arg-type]
        updated_at=now,
    )


def _patched_secrets(
    record: ConnectionRecord,
    data: ConnectionInput,
    body: Mapping[str, object],
    cipher: CredentialCipher,
) -> tuple[str | None, str | None, str]:
    """``(password, ssl key, key version)`` ciphertexts after a create or PATCH.

    A sent value is encrypted under the current key. A kept value stays as stored, unless
    the record's key version changes with this PATCH: then it is re-encrypted too, so one
    version label fits both ciphertexts (§6.4).
    """
    sqlite = data.type == _SQLITE
    sent_password = data.password if "password" in body else None
    ssl = data.ssl
    sent_key = (ssl.key if ssl else None) if "ssl" in body else None
    kept_password = (  # a MONGODB PATCH may remove both credentials (§2.5)
        None if sqlite or sent_password or data.user_name is None else record.password_encrypted
    )
    kept_key = None if "ssl" in body or sqlite else record.ssl_key_encrypted
    if sent_password is None and sent_key is None:
        return kept_password, kept_key, record.encryption_key_version
    password = cipher.encrypt(sent_password, record.id) if sent_password else kept_password
    key = cipher.encrypt(sent_key, record.id) if sent_key else kept_key
    if record.encryption_key_version != cipher.version:
        password = _rekey(cipher, record, password, kept_password)
        key = _rekey(cipher, record, key, kept_key)
    return password, key, cipher.version


def _rekey(
    cipher: CredentialCipher, record: ConnectionRecord, value: str | None, kept: str | None
) -> str | None:
    if value is None or value != kept:
        return value
    try:
        plain = cipher.decrypt(value, record.id, record.encryption_key_version)
    except CredentialError:
        return value  # unreadable before the PATCH; it stays unreadable
    return cipher.encrypt(plain, record.id)
