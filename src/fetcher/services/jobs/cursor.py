"""The ``cursor`` of ``GET /v1/fetcher`` (issue 21): opaque, tamper-evident, and bound to the
tenant and the filters it was issued under.

A cursor is ``<position>.<tag>``, both base64url without padding: ``position`` is the last
row of the page it follows, ``<createdAt epoch ms>:<id>``; ``tag`` is the first 16 bytes of
HMAC-SHA256 over a version label, the tenant (§12.5), the canonical filters (statuses,
connection, window, ``X-Product-Name``) and the position. A changed byte, a cursor of another
tenant, or one reused under other filters fails the check (``400 FET-0405``, parameter
``cursor``), and so does any text that is not the canonical base64url of its bytes (the
padding bits of a last character included); the page size may change between pages. The
tenant and filters are not in the text, only in the tag.

The key is derived from the internal HMAC key (§6.2), which every Manager of a deployment shares,
so any Manager accepts any other's cursors and no new secret setting is needed; rotating
``APP_ENC_KEY`` invalidates open cursors (a client starts over from the first page).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from fetcher.services.errors import ApiError
from fetcher.services.jobs.list_query import JobListRequest

__all__ = ["CURSOR_INVALID", "CursorCodec", "cursor_key"]

_LABEL = b"fetcher-job-list-cursor-v1"
_TAG_BYTES = 16
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CURSOR_INVALID = "cursor is invalid, or was issued for another tenant or other filters"


def cursor_key(internal_hmac_key: bytes) -> bytes:
    """The cursor key: HMAC-SHA256(internal HMAC key, label), a purpose key of its own."""
    return hmac.new(internal_hmac_key, _LABEL, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _scope(tenant: str, request: JobListRequest, product: str | None) -> bytes:
    """What a cursor is bound to, canonically (sorted statuses, UTC milliseconds)."""

    def ms(moment: datetime | None) -> int | None:
        return None if moment is None else (moment - _EPOCH) // timedelta(milliseconds=1)

    filters = {
        "tenant": tenant,
        "status": sorted(request.statuses),
        "connectionId": request.connection_id,
        "from": ms(request.created_from),
        "before": ms(request.created_before),
        "product": product,
    }
    return json.dumps(filters, sort_keys=True, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class CursorCodec:
    key: bytes = field(repr=False)

    def _tag(self, scope: bytes, position: bytes) -> bytes:
        message = _LABEL + b"\n" + scope + b"\n" + position
        return hmac.new(self.key, message, hashlib.sha256).digest()[:_TAG_BYTES]

    def encode(
        self,
        position: tuple[datetime, str],
        *,
        tenant: str,
        request: JobListRequest,
        product: str | None,
    ) -> str:
        moment, job_id = position
        ms = (moment - _EPOCH) // timedelta(milliseconds=1)
        raw = f"{ms}:{job_id}".encode("ascii")
        tag = self._tag(_scope(tenant, request, product), raw)
        return f"{_b64(raw)}.{_b64(tag)}"

    def decode(
        self, cursor: str, *, tenant: str, request: JobListRequest, product: str | None
    ) -> tuple[datetime, str]:
        """The position, or ``400 FET-0405`` naming ``cursor``."""
        try:
            text, _, tag_text = cursor.partition(".")
            raw, tag = _unb64(text), _unb64(tag_text)
            # Canonical form only: base64 ignores a last character's padding bits, so 18
            # one-character variants of a cursor would decode to the same bytes.
            if _b64(raw) != text or _b64(tag) != tag_text:
                raise ValueError("not canonical")
            expected = self._tag(_scope(tenant, request, product), raw)
            if not hmac.compare_digest(tag, expected):
                raise ValueError("tag")
            ms, _, job_id = raw.decode("ascii").partition(":")
            return _EPOCH + timedelta(milliseconds=int(ms)), job_id
        except (ValueError, binascii.Error, OverflowError):
            raise ApiError("FET-0405", CURSOR_INVALID, fields={"cursor": CURSOR_INVALID}) from None
