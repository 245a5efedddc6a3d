"""Where result objects are read from: a small protocol and two implementations (CONTRACT §6.3).

:class:`ObjectSource` is all :func:`~fetcher.consumer.result.open_result` needs: the stored
bytes of one key, as an async stream of chunks. :class:`LocalFolderSource` reads the embedded
local store's layout (``<dir>/<object key>``); :class:`S3Source` reads ``OBJECT_STORAGE_BUCKET``
through aioboto3 (the ``s3`` extra). Both raise :class:`ResultNotFoundError` for a missing key
and stream with bounded memory (one chunk at a time).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

from fetcher.consumer.errors import ResultError, ResultNotFoundError
from fetcher.lifecycle import AsyncResource

__all__ = ["DEFAULT_CHUNK_SIZE", "LocalFolderSource", "ObjectSource", "S3Source"]

DEFAULT_CHUNK_SIZE = 256 * 1024


@runtime_checkable
class ObjectSource(Protocol):
    """Read access to stored result objects.

    ``chunks(key)`` MUST yield the object's stored bytes in order, each chunk bounded in size,
    and MUST raise :class:`ResultNotFoundError` when no object exists at ``key``. Other
    failures raise :class:`ResultError`; credentials never appear in their messages.
    """

    def chunks(self, key: str) -> AsyncIterator[bytes]: ...


def _safe_parts(key: str) -> tuple[str, ...]:
    parts = PurePosixPath(key).parts
    if not parts or key.startswith("/") or any(p in ("..", ".", "") for p in parts):
        raise ResultError("object key must be a relative path without '..'")
    return parts


class LocalFolderSource:
    """Objects under a local folder, ``<root>/<object key>`` (the embedded local store)."""

    def __init__(self, root: str | os.PathLike[str], *, chunk_size: int = DEFAULT_CHUNK_SIZE):
        self.root = Path(root)
        self.chunk_size = chunk_size

    def __repr__(self) -> str:
        return f"LocalFolderSource({str(self.root)!r})"

    async def chunks(self, key: str) -> AsyncIterator[bytes]:
        path = self.root.joinpath(*_safe_parts(key))
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            raise ResultNotFoundError(f"no result object at {key!r}") from None
        except OSError as exc:
            raise ResultError(f"cannot read result object: {exc.strerror}") from None
        with handle:
            while chunk := handle.read(self.chunk_size):
                yield chunk


class S3Source(AsyncResource):
    """Objects in an S3 bucket, read with aioboto3 (``pip install 'fetcher[s3]'``).

    Use as ``async with S3Source(bucket, endpoint_url=…, …) as source``. The client is opened
    on entry and closed on exit; nothing is opened at construction. ``path_style`` suits
    S3-compatible servers such as SeaweedFS or MinIO.
    """

    def __init__(
        self,
        bucket: str,
        *,
        endpoint_url: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        region: str = "us-east-1",
        path_style: bool = True,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        self.bucket = bucket
        self.endpoint_url = endpoint_url
        self._access_key_id = access_key_id
        self._secret_access_key = secret_access_key
        self.region = region
        self.path_style = path_style
        self.chunk_size = chunk_size
        self._client: Any = None
        self._context: Any = None

    def __repr__(self) -> str:
        return f"S3Source(bucket={self.bucket!r}, endpoint_url={self.endpoint_url!r})"

    async def open(self) -> None:
        import aioboto3
        from botocore.config import Config  # type: ignore[import-untyped]

        style = "path" if self.path_style else "auto"
        self._context = aioboto3.Session().client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self._access_key_id,
            aws_secret_access_key=self._secret_access_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": style}, retries={"max_attempts": 3}),
        )
        self._client = await self._context.__aenter__()

    async def close(self) -> None:
        context, self._context, self._client = self._context, None, None
        if context is not None:
            await context.__aexit__(None, None, None)

    async def chunks(self, key: str) -> AsyncIterator[bytes]:
        from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

        if self._client is None:
            raise ResultError("S3Source is not open: use 'async with S3Source(...)'")
        try:
            response = await self._client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "NotFound"):
                raise ResultNotFoundError(f"no result object at {key!r}") from None
            raise ResultError(f"cannot read result object: {code or 'S3 error'}") from None
        except BotoCoreError as exc:
            raise ResultError(f"cannot read result object: {type(exc).__name__}") from None
        body = response["Body"]
        try:
            while chunk := await body.read(self.chunk_size):
                yield bytes(chunk)
        finally:
            body.close()
