"""Credentials at rest (contract §6.4): AES-256-GCM with AAD = the connection ID.

New ciphertexts use the current key and ``APP_ENC_KEY_VERSION``; decryption picks the key of
the stored version (the current one or an ``APP_ENC_KEY_PREVIOUS`` entry).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fetcher.crypto import DecryptionError, KeySet, decrypt_credential, encrypt_credential

__all__ = ["CredentialCipher", "CredentialError"]


class CredentialError(Exception):
    """A stored credential cannot be read; ``reason`` is the §4.5 detail text."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CredentialCipher:
    version: str
    keys: KeySet = field(repr=False)
    previous: Mapping[str, KeySet] = field(default_factory=dict, repr=False)

    def encrypt(self, plaintext: str, connection_id: str) -> str:
        return encrypt_credential(self.keys.credentials, plaintext, connection_id)

    def decrypt(self, stored: str, connection_id: str, version: str) -> str:
        """Raises :class:`CredentialError` with ``unsupported key version: <v>`` or
        ``decryption failed``."""
        if version == self.version:
            key = self.keys.credentials
        elif version in self.previous:
            key = self.previous[version].credentials
        else:
            raise CredentialError(f"unsupported key version: {version}")
        try:
            return decrypt_credential(key, stored, connection_id)
        except DecryptionError:
            raise CredentialError("decryption failed") from None
