"""Fetcher cryptography: keys, AES-GCM, HMAC, message signing and redaction (CONTRACT §6 to §9).

This package imports only the standard library and ``cryptography``.
"""

from fetcher.crypto.aead import (
    DecryptionError,
    ObjectDecryptor,
    ObjectEncryptor,
    decrypt_credential,
    decrypt_object,
    encrypt_credential,
    encrypt_object,
    encrypt_object_stream,
    new_ephemeral_key,
    open_chunk,
    seal_chunk,
)
from fetcher.crypto.hmac import HmacStream, hmac_hex, verify_hex
from fetcher.crypto.keys import (
    TENANT_PATTERN_TEXT,
    KeySet,
    MasterKeyError,
    derive_key,
    generate_master_key,
    is_tenant_id,
    parse_master_key,
)
from fetcher.crypto.redact import REDACTED, Redactor, redact, redact_url
from fetcher.crypto.signing import (
    SIGNATURE_VERSION,
    extract_job_id,
    sign_message,
    signing_input,
    verify_message,
)

__all__ = [
    # keys (§6.1, §6.2)
    "KeySet",
    "MasterKeyError",
    "derive_key",
    "generate_master_key",
    "TENANT_PATTERN_TEXT",
    "is_tenant_id",
    "parse_master_key",
    # AES-GCM (§6.3, §6.4, §4.3.1)
    "DecryptionError",
    "ObjectDecryptor",
    "ObjectEncryptor",
    "decrypt_credential",
    "decrypt_object",
    "encrypt_credential",
    "encrypt_object",
    "encrypt_object_stream",
    "new_ephemeral_key",
    "open_chunk",
    "seal_chunk",
    # HMAC (§6.3)
    "HmacStream",
    "hmac_hex",
    "verify_hex",
    # signing (§7.3, §8.5)
    "SIGNATURE_VERSION",
    "extract_job_id",
    "sign_message",
    "signing_input",
    "verify_message",
    # redaction (§8.7, §9.2)
    "REDACTED",
    "Redactor",
    "redact",
    "redact_url",
]
