"""Master key parsing and purpose-key derivation (CONTRACT §6.1, §6.2).

* ``APP_ENC_KEY`` is standard base64 with padding, surrounding whitespace trimmed, decoding to
  at least 32 bytes (§6.1). Failures raise :class:`MasterKeyError` whose ``reason`` is exactly
  one of the §6.1 reasons.
* Each purpose key is HKDF-SHA256 (RFC 5869) over all master-key bytes, no salt, ``info`` = the
  label, ``L = 32`` (§6.2).
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = [
    "CREDENTIALS_LABEL",
    "EXTERNAL_HMAC_LABEL",
    "INTERNAL_HMAC_LABEL",
    "KEY_SIZE",
    "MIN_MASTER_KEY_BYTES",
    "STORAGE_LABEL",
    "KeySet",
    "MasterKeyError",
    "derive_key",
    "generate_master_key",
    "TENANT_PATTERN_TEXT",
    "is_tenant_id",
    "parse_master_key",
    "tenant_label",
]

MIN_MASTER_KEY_BYTES = 32
"""§6.1: the decoded master key must hold at least this many bytes."""

KEY_SIZE = 32
"""§6.2: every derived key is 32 bytes (AES-256 / HMAC-SHA256)."""

CREDENTIALS_LABEL = b"fetcher-credentials-v1"
INTERNAL_HMAC_LABEL = b"fetcher-internal-hmac-v1"
EXTERNAL_HMAC_LABEL = b"fetcher-external-hmac-v1"
STORAGE_LABEL = b"fetcher-storage-encryption-v1"

TENANT_CACHE_SIZE = 1024
"""§12.5: at most this many tenants' derived key pairs are kept per :class:`KeySet` (LRU)."""

REASON_REQUIRED = "APP_ENC_KEY is required"
REASON_INVALID = "invalid master key (base64)"


class MasterKeyError(ValueError):
    """The master key is unusable; ``reason`` is an exact §6.1 reason string."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_master_key(text: str | None) -> bytes:
    """Decode ``APP_ENC_KEY`` per §6.1 and return the raw master key bytes.

    ``None`` or blank → ``APP_ENC_KEY is required``; anything that is not strict standard base64
    with padding → ``invalid master key (base64)``; fewer than 32 decoded bytes →
    ``master key too short: got <n> bytes, minimum 32 required``.
    """
    if text is None or not text.strip():
        raise MasterKeyError(REASON_REQUIRED)
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise MasterKeyError(REASON_INVALID) from None
    if len(raw) < MIN_MASTER_KEY_BYTES:
        raise MasterKeyError(
            f"master key too short: got {len(raw)} bytes, minimum {MIN_MASTER_KEY_BYTES} required"
        )
    return raw


def derive_key(master: bytes, label: bytes) -> bytes:
    """HKDF-SHA256(IKM=master, salt=none, info=label, L=32) as §6.2 defines."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_SIZE, salt=None, info=label).derive(master)


def generate_master_key() -> str:
    """A fresh master key: 32 random bytes, standard base64 with padding (§6.1 format)."""
    return base64.b64encode(secrets.token_bytes(MIN_MASTER_KEY_BYTES)).decode("ascii")


class _TenantCache:
    """A bounded LRU of per-tenant key sets (§12.5), shared by threads (HKDF is cheap, but a
    key per event or result is derived once per tenant, not per use)."""

    __slots__ = ("_entries", "_lock", "_size")

    def __init__(self, size: int = TENANT_CACHE_SIZE) -> None:
        self._entries: OrderedDict[str, KeySet] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def get(self, tenant: str) -> KeySet | None:
        with self._lock:
            found = self._entries.get(tenant)
            if found is not None:
                self._entries.move_to_end(tenant)
            return found

    def put(self, tenant: str, keys: KeySet) -> None:
        with self._lock:
            self._entries[tenant] = keys
            self._entries.move_to_end(tenant)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return "_TenantCache(<redacted>)"


@dataclass(frozen=True, slots=True)
class KeySet:
    """The four §6.2 purpose keys of one master key. Its repr never shows key bytes.

    A key set derived from a master key (:meth:`from_master`) also yields each tenant's keys
    (:meth:`for_tenant`, §12.5); one built from the four keys alone has only the tenant ``""``.
    """

    credentials: bytes = field(repr=False)
    """AES-256-GCM key for stored passwords and ``ssl.key`` (§6.4)."""
    internal_hmac: bytes = field(repr=False)
    """HMAC key for Manager → Worker work messages (§7.3)."""
    external_hmac: bytes = field(repr=False)
    """HMAC key for ``resultHmac`` (§6.3) and job-event signatures (§8.5)."""
    storage: bytes = field(repr=False)
    """AES-256-GCM key for result objects (§6.3)."""
    master: bytes | None = field(default=None, repr=False, compare=False)
    """The decoded master key, kept only to derive per-tenant keys (never printed)."""
    _tenants: _TenantCache = field(
        default_factory=_TenantCache, init=False, repr=False, compare=False
    )

    @classmethod
    def from_master(cls, master: bytes) -> KeySet:
        """Derive every purpose key from the decoded master key bytes."""
        return cls(
            credentials=derive_key(master, CREDENTIALS_LABEL),
            internal_hmac=derive_key(master, INTERNAL_HMAC_LABEL),
            external_hmac=derive_key(master, EXTERNAL_HMAC_LABEL),
            storage=derive_key(master, STORAGE_LABEL),
            master=bytes(master),
        )

    @classmethod
    def from_text(cls, text: str | None) -> KeySet:
        """Parse ``APP_ENC_KEY`` text (§6.1) and derive its keys; raises :class:`MasterKeyError`."""
        return cls.from_master(parse_master_key(text))

    def for_tenant(self, tenant: str) -> KeySet:
        """The key set a tenant's jobs use (§12.5): the same credentials and internal HMAC keys,
        and the tenant's own external HMAC and storage keys (HKDF info
        ``<label>/tenant/<tenantId>``). The tenant ``""`` (single-tenant mode, and rows written
        in it) is this key set itself, so the §6.6 keys stay unchanged.

        Raises :class:`ValueError` for an ID that breaks the tenant pattern, or when this key
        set was built without its master key.
        """
        if tenant == "":
            return self
        cached = self._tenants.get(tenant)
        if cached is not None:
            return cached
        external = tenant_label(EXTERNAL_HMAC_LABEL, tenant)  # validates the tenant pattern
        storage = tenant_label(STORAGE_LABEL, tenant)
        if self.master is None:
            raise ValueError("per-tenant keys need the master key")
        derived = KeySet(
            credentials=self.credentials,
            internal_hmac=self.internal_hmac,
            external_hmac=derive_key(self.master, external),
            storage=derive_key(self.master, storage),
        )
        self._tenants.put(tenant, derived)
        return derived

    def __repr__(self) -> str:
        return "KeySet(<redacted>)"

    __str__ = __repr__


def is_tenant_id(value: object) -> bool:
    """True when ``value`` is a string matching the tenant pattern of §12.5,
    ``^[a-z0-9][a-z0-9_-]{0,62}$`` (``re.fullmatch``)."""
    return isinstance(value, str) and _TENANT_PATTERN.fullmatch(value) is not None


def tenant_label(label: bytes, tenant: str) -> bytes:
    """§12.5: the HKDF ``info`` of a per-tenant key, ``<label>/tenant/<tenantId>``.

    Only the external HMAC and storage labels have per-tenant keys; ``tenant`` must match the
    tenant pattern ``^[a-z0-9][a-z0-9_-]{0,62}$`` (checked here, so a malformed ID never
    derives a key).
    """
    if label not in (EXTERNAL_HMAC_LABEL, STORAGE_LABEL):
        raise ValueError("only the external HMAC and storage keys are per tenant")
    if not is_tenant_id(tenant):
        raise ValueError(f"tenant ID does not match {TENANT_PATTERN_TEXT}")
    return label + b"/tenant/" + tenant.encode("ascii")


#: §12.5 "the tenant pattern", as the messages that name it print it.
TENANT_PATTERN_TEXT = "^[a-z0-9][a-z0-9_-]{0,62}$"
_TENANT_PATTERN = re.compile(TENANT_PATTERN_TEXT[1:-1])
