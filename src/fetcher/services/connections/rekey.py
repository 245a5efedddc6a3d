"""Re-encrypt stored credentials under the current key (contract §14.3, ``fetcher
rotate-credentials``).

Every stored connection of every tenant, deleted ones included, whose key version is not
``APP_ENC_KEY_VERSION`` has its password and ``ssl.key`` decrypted with the key of its version
(``APP_ENC_KEY_PREVIOUS``) and encrypted again under the current key (AAD = the connection ID,
§6.4), its version set with a compare-and-set on the old one, so a PATCH that re-encrypted the
row meanwhile wins. Rows are read in ID order, a page at a time; a row whose version has no
key, or that does not decrypt, is counted as failed and left as it is, and the run goes on.
Running it again is harmless: what is current is not touched.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from fetcher.services.connections.credentials import CredentialCipher, CredentialError
from fetcher.services.records import ConnectionRecord
from fetcher.services.store_roles import CredentialRekeying

__all__ = ["RekeyReport", "rekey_credentials"]

log = logging.getLogger(__name__)

PAGE = 200


@dataclass(frozen=True, slots=True)
class RekeyReport:
    rekeyed: int
    #: Changed by someone else between the read and the CAS (already current then).
    raced: int
    failed: int


async def rekey_credentials(store: CredentialRekeying, cipher: CredentialCipher) -> RekeyReport:
    rekeyed = raced = failed = 0
    after = ""
    while page := await store.connections_under_other_keys(
        cipher.version, after_id=after, limit=PAGE
    ):
        for record in page:
            after = record.id
            try:
                password, ssl_key = _reencrypted(record, cipher)
            except CredentialError as exc:
                failed += 1
                log.error("connection %s not re-encrypted: %s", record.id, exc.reason)
                continue
            done = await store.rekey_connection(
                record,
                password_encrypted=password,
                ssl_key_encrypted=ssl_key,
                version=cipher.version,
            )
            rekeyed, raced = (rekeyed + 1, raced) if done else (rekeyed, raced + 1)
    return RekeyReport(rekeyed, raced, failed)


def _reencrypted(
    record: ConnectionRecord, cipher: CredentialCipher
) -> tuple[str | None, str | None]:
    def again(stored: str | None) -> str | None:
        if stored is None:
            return None
        plain = cipher.decrypt(stored, record.id, record.encryption_key_version)
        return cipher.encrypt(plain, record.id)

    return again(record.password_encrypted), again(record.ssl_key_encrypted)
