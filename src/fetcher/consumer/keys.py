"""The two keys a consumer holds (CONTRACT §6.2, §6.5, §12.5).

A consumer never needs the master key: ``fetcher derive-key`` prints the external HMAC key
(event signatures, ``result.hmac``) and ``fetcher derive-key --purpose storage`` the storage key
(result decryption). :meth:`ConsumerKeys.from_hex` takes those lines' hex values. Holders of the
master key may derive both with :meth:`ConsumerKeys.from_master`; with ``tenant`` they get that
tenant's keys (HKDF info ``…-v1/tenant/<tenantId>``, §12.5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fetcher.crypto.keys import (
    EXTERNAL_HMAC_LABEL,
    KEY_SIZE,
    STORAGE_LABEL,
    derive_key,
    parse_master_key,
    tenant_label,
)

__all__ = ["SINGLE_TENANT", "ConsumerKeys"]

SINGLE_TENANT = "single-tenant"
"""§8.4: the ``ce-tenantid`` of every event of a single-tenant deployment."""


def _key_from_hex(name: str, text: str) -> bytes:
    cleaned = text.strip()
    if ":" in cleaned:  # accept a whole derive-key line, "External HMAC Key (hex): <hex>"
        cleaned = cleaned.rsplit(":", 1)[1].strip()
    try:
        raw = bytes.fromhex(cleaned)
    except ValueError:
        raise ValueError(f"{name} key must be {KEY_SIZE * 2} hex characters") from None
    if len(raw) != KEY_SIZE:
        raise ValueError(f"{name} key must be {KEY_SIZE * 2} hex characters")
    return raw


@dataclass(frozen=True, slots=True)
class ConsumerKeys:
    """External HMAC key and (optionally) storage key of one tenant, or of a single-tenant
    deployment when ``tenant`` is ``None``. Its repr never shows key bytes."""

    external_hmac: bytes = field(repr=False)
    storage: bytes | None = field(default=None, repr=False)
    tenant: str | None = None

    def __post_init__(self) -> None:
        if len(self.external_hmac) != KEY_SIZE:
            raise ValueError(f"external HMAC key must be {KEY_SIZE} bytes")
        if self.storage is not None and len(self.storage) != KEY_SIZE:
            raise ValueError(f"storage key must be {KEY_SIZE} bytes")
        if self.tenant is not None:
            tenant_label(EXTERNAL_HMAC_LABEL, self.tenant)  # validates the tenant pattern

    @classmethod
    def from_hex(
        cls, *, external: str, storage: str | None = None, tenant: str | None = None
    ) -> ConsumerKeys:
        """Keys from ``derive-key`` output (the hex, or the whole printed line)."""
        return cls(
            external_hmac=_key_from_hex("external HMAC", external),
            storage=None if storage is None else _key_from_hex("storage", storage),
            tenant=tenant,
        )

    @classmethod
    def from_master(cls, master_key: str, *, tenant: str | None = None) -> ConsumerKeys:
        """Derive both keys from ``APP_ENC_KEY`` text (§6.1, §6.2); per tenant with ``tenant``
        (§12.5). Raises :class:`fetcher.crypto.MasterKeyError` for an unusable master key."""
        master = parse_master_key(master_key)
        if tenant is None:
            return cls(derive_key(master, EXTERNAL_HMAC_LABEL), derive_key(master, STORAGE_LABEL))
        return cls(
            derive_key(master, tenant_label(EXTERNAL_HMAC_LABEL, tenant)),
            derive_key(master, tenant_label(STORAGE_LABEL, tenant)),
            tenant,
        )

    @property
    def tenant_id(self) -> str:
        """The ``ce-tenantid`` these keys' events carry (``single-tenant`` without a tenant)."""
        return SINGLE_TENANT if self.tenant is None else self.tenant

    def __repr__(self) -> str:
        return f"ConsumerKeys(tenant={self.tenant!r}, <keys redacted>)"

    __str__ = __repr__
