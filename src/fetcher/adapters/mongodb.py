"""The MongoDB connector: pymongo's native async API (contract §2.9.1, §3.2, §3.4, §5.3, §11).

* Connect (§2.9.1, §11.1): ``AsyncMongoClient`` with keyword arguments only, never a URI
  string; the database is ``client[databaseName]``. The pinned address of the SSRF pre-dial is
  the host that is dialled, and a pinned (guarded) connection is always ``directConnection``
  so replica-set discovery cannot move the client to another address. ``authSource`` comes
  from ``metadata.authSource`` (default ``admin``) and is used only with credentials (§2.5:
  ``userName``/``password`` are optional together on MongoDB). Connect and server selection
  time out after 10 s; a ``ping`` in ``__aenter__`` makes an unreachable server or a refused
  login a connect failure.
* TLS (§11.2): ``disable``/``false``/absent → off; ``true``/``enable`` → ``tls=True``;
  ``insecure`` → ``tls=True, tlsInsecure=True``. ``ssl.ca`` → ``tlsCAFile``; ``ssl.cert`` +
  ``ssl.key`` → one ``tlsCertificateKeyFile`` (temporary files: ``O_EXCL``, 0600, tmpfs when
  available, unlinked right after the connect).
* Discovery (§11.3): ``listCollections`` (collections and views, ``system.*`` excluded) and
  top-level field sampling sized by the collection's document count; each field's type is
  the highest-priority BSON type seen, which drives filter coercion (§3.4) through the
  column family and ``native_type`` (``objectId`` turns a 24-hex filter value into an
  ObjectId in :mod:`fetcher.engine.filters.mongo`).
* Extraction (§3.2, §3.4, §5.3): one ``find`` with the rendered filter document (its Extended
  JSON v2 markers turned into BSON with ``bson.json_util``), streamed through the cursor in
  batches of ``batch_size``; named fields give exactly those keys (a missing one → ``null``,
  ``_id`` only when named), ``*`` gives each document's own top-level keys. Values are
  encoded by :func:`encode_bson`.
* Depth: a real ``mongod`` nests documents at most 100 levels, other wire-compatible servers
  may go deeper. A field whose value nests deeper than ``MAX_JSON_DEPTH`` (250) levels fails
  the query with ``failed to query datasource '<ds>': column '<field>' of table '<collection>'
  holds a JSON value nested deeper than 250 levels``, from the engine's writer or from
  :func:`_rows` when the conversion itself runs out of stack; a document too deep for
  pymongo's BSON decoder (about 900 levels) fails with the same text without the field, which
  the decoder does not tell.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from types import TracebackType
from typing import Any, Final, Self
from uuid import UUID

import bson.errors
import pymongo.errors
from bson import json_util
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from fetcher.adapters.batch_sizing import BatchSizer
from fetcher.adapters.secret_files import pem_files
from fetcher.adapters.sql._common import (
    CONNECT_TIMEOUT_SECONDS,
    DISCOVERY_TIMEOUT_SECONDS,
    NetworkConnector,
    Phase,
    catalog_type_error,
    engine_error,
    translate_errors,
)
from fetcher.engine import ConnectionDescriptor
from fetcher.engine.kit import (
    BoundFieldFilter,
    Column,
    DiscoveredSchema,
    JsonDepthError,
    Row,
    RowBatch,
    TableQuery,
    TableSchema,
    TlsSettings,
    TypeFamily,
    check_mongo_field,
    encode_bytes,
    encode_datetime,
    encode_decimal,
    encode_float,
    encode_text,
    encode_uuid,
    on_fresh_stack,
    render_mongo_filter,
    too_deep_member,
)

__all__ = [
    "FieldTally",
    "MongoConnector",
    "client_options",
    "coerce_filters",
    "encode_bson",
    "filter_to_bson",
    "flatten_filter",
    "map_mongo_errors",
    "mongo_type_of",
    "sample_size",
    "sampled_columns",
]

Document = dict[str, Any]

#: §11.1: the default port and ``authSource``.
DEFAULT_PORT: Final = 27017
DEFAULT_AUTH_SOURCE: Final = "admin"
#: §11.3: collections named ``system.*`` are system objects.
_SYSTEM_PREFIX: Final = "system."
#: Collections sampled at once during discovery (each sample is one cursor).
_DISCOVERY_CONCURRENCY: Final = 4
#: Documents per cursor batch while sampling (bounded memory, few round trips).
_SAMPLE_BATCH: Final = 500
_TLS_MODES_ON: Final = frozenset({"true", "enable", "insecure"})
_TRUE_TEXT: Final = frozenset({"true"})


#: The text of pymongo's ``InvalidBSON`` for a document nested too deep for its C decoder.
_DECODER_RECURSION: Final = "maximum recursion depth exceeded"


@contextmanager
def map_mongo_errors(
    phase: Phase, datasource: str, table: TableSchema | None = None
) -> Iterator[None]:
    """Translate pymongo, BSON, socket and timeout failures into the §4.5 ``EngineError``.

    pymongo error texts name the server address (``Addr: …``, ``host:port``) but never the
    password (credentials are keyword arguments); hosts redact ``detail`` further (§8.7). A
    document of ``table`` nested too deep (``JsonDepthError``, or pymongo's decoder running out
    of recursion on one, far past ``MAX_JSON_DEPTH``) fails with the nesting text.
    """
    driver_errors = (pymongo.errors.PyMongoError, bson.errors.BSONError)
    with translate_errors(phase, datasource, driver_errors, table=table):
        try:
            yield
        except bson.errors.InvalidBSON as exc:
            if _DECODER_RECURSION in str(exc):
                raise JsonDepthError from exc
            raise


# --------------------------------------------------------------------------------------------
# Client options (§2.9.1, §11.1, §11.2)
# --------------------------------------------------------------------------------------------


def _metadata_flag(value: object) -> bool:
    """``metadata.directConnection``: ``true`` or ``"true"`` (case-insensitive) is on."""
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.strip().lower() in _TRUE_TEXT


def _tls_options(tls: TlsSettings | None, files: Mapping[str, str]) -> dict[str, Any]:
    """§11.2 MongoDB rows: the client TLS options of ``ssl.mode`` (off by default)."""
    mode = tls.mode if tls is not None else ""
    if mode not in _TLS_MODES_ON:
        return {"tls": False}
    options: dict[str, Any] = {"tls": True}
    if mode == "insecure":
        options["tlsInsecure"] = True
    if "ca" in files:
        options["tlsCAFile"] = files["ca"]
    if "cert_key" in files:
        options["tlsCertificateKeyFile"] = files["cert_key"]
    return options


def client_options(
    connection: ConnectionDescriptor,
    *,
    pinned_address: str | None,
    tls_files: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every ``AsyncMongoClient`` keyword argument of one connection (never a URI, §2.9.1).

    The pinned address (set only under the SSRF guard) is dialled, and forces
    ``directConnection=True`` whatever the metadata says (§2.9.1 rule 4). pymongo has no
    separate TLS server name, so a pinned TLS connection verifies the certificate against the
    pinned address: a certificate without that IP fails closed, never open.
    Without credentials the client does not authenticate, except by X.509 when a client
    certificate is configured (§2.5).
    """
    c = connection
    metadata = c.metadata
    options: dict[str, Any] = {
        "host": _bracketed(pinned_address or c.host),
        "port": c.port if c.port is not None else DEFAULT_PORT,
        "directConnection": pinned_address is not None
        or _metadata_flag(metadata.get("directConnection")),
        "connectTimeoutMS": CONNECT_TIMEOUT_SECONDS * 1000,
        "serverSelectionTimeoutMS": CONNECT_TIMEOUT_SECONDS * 1000,
        "socketTimeoutMS": None,  # §11.1: queries are bounded only by the job timeout
        "appname": "fetcher",
        "document_class": dict,
        "tz_aware": False,  # BSON datetimes are UTC; §5.3 takes naive values as UTC
        "datetime_conversion": "DATETIME_AUTO",  # out-of-range dates arrive as DatetimeMS
        "unicode_decode_error_handler": "replace",  # §5.3: invalid UTF-8 → U+FFFD
        "retryWrites": False,  # the connector never writes
        **_tls_options(c.ssl, tls_files or {}),
    }
    if c.username is not None or c.password is not None:
        auth_source = metadata.get("authSource")
        options["username"] = c.username
        options["password"] = c.password
        options["authSource"] = auth_source if isinstance(auth_source, str) else DEFAULT_AUTH_SOURCE
    elif options["tls"] and "tlsCertificateKeyFile" in options:
        options["authMechanism"] = "MONGODB-X509"
    return options


def _bracketed(host: str | None) -> str | None:
    """pymongo reads ``host`` as a host list and refuses a bare IPv6 literal (``ValueError``:
    "must be enclosed in '[' and ']'"), while §2.5 accepts IPv6 without brackets: bracket it."""
    if host is not None and ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


@contextmanager
def tls_files(tls: TlsSettings | None) -> Iterator[dict[str, str]]:
    """§11.2: ``ca`` → one PEM file, ``cert`` + ``key`` → one combined PEM file, both unlinked
    on exit. Nothing is written when TLS is off."""
    wanted: list[tuple[str, str]] = []
    if tls is not None and tls.mode in _TLS_MODES_ON:
        if tls.ca:
            wanted.append(("ca", tls.ca))
        if tls.cert and tls.key:
            wanted.append(("cert_key", tls.cert.rstrip("\n") + "\n" + tls.key))
    with pem_files(*(pem for _, pem in wanted)) as paths:
        yield {name: path for (name, _), path in zip(wanted, paths, strict=True)}


# --------------------------------------------------------------------------------------------
# Values (§5.3)
# --------------------------------------------------------------------------------------------

#: BSON regex flag letters, in the alphabetical order the BSON spec writes them.
_REGEX_FLAGS: Final = (
    (re.IGNORECASE, "i"),
    (re.LOCALE, "l"),
    (re.MULTILINE, "m"),
    (re.DOTALL, "s"),
    (re.UNICODE, "u"),
    (re.VERBOSE, "x"),
)
_UUID_SUBTYPES: Final = frozenset({3, 4})


def _regex_text(value: Regex[Any]) -> str:
    """§5.3 BSON regex: ``/<pattern>/<flags>``."""
    letters = "".join(letter for flag, letter in _REGEX_FLAGS if value.flags & flag)
    pattern = value.pattern
    text = pattern.decode("utf-8", "replace") if isinstance(pattern, bytes) else pattern
    return f"/{encode_text(text)}/{letters}"


def _binary(value: bytes) -> str:
    """§5.3: binary subtype 3 or 4 of 16 bytes → a UUID string; any other binary → base64."""
    if isinstance(value, Binary) and value.subtype in _UUID_SUBTYPES and len(value) == 16:
        return encode_uuid(UUID(bytes=bytes(value)))
    return encode_bytes(value)


def _datetime_ms(value: DatetimeMS) -> str:
    """A BSON datetime outside years 1..9999: its Extended JSON text (the engine's own form)."""
    return json_util.dumps(value)


def _document(value: Mapping[Any, Any]) -> dict[str, object]:
    return {
        encode_text(k if isinstance(k, str) else str(k)): encode_bson(v) for k, v in value.items()
    }


def _array(value: Sequence[Any]) -> list[object]:
    return [encode_bson(item) for item in value]


#: Exact-type dispatch for the common BSON values (``bool`` is looked up before ``int``
#: because ``type(True) is bool``).
_ENCODERS: Final[dict[type, Callable[[Any], object]]] = {
    str: encode_text,
    bool: bool,
    int: int,
    Int64: int,
    float: encode_float,
    datetime: encode_datetime,
    ObjectId: str,  # 24 lower-case hex characters
    dict: _document,
    list: _array,
    Decimal128: lambda v: encode_decimal(v.to_decimal()),
    Binary: _binary,
    bytes: encode_bytes,
    Timestamp: lambda v: encode_datetime(v.as_datetime()),
    Regex: _regex_text,
    UUID: encode_uuid,
    DatetimeMS: _datetime_ms,
    Decimal: encode_decimal,
}


def encode_bson(value: object) -> object:
    """One decoded BSON value as its §5.3 JSON-ready value; anything else → ``str()``."""
    if value is None:
        return None
    encoder = _ENCODERS.get(type(value))
    if encoder is not None:
        return encoder(value)
    for kind, fallback in _ENCODERS.items():
        if isinstance(value, kind):
            return fallback(value)
    if isinstance(value, Mapping):
        return _document(value)
    if isinstance(value, list | tuple):
        return _array(value)
    return encode_text(str(value))


# --------------------------------------------------------------------------------------------
# Discovery (§11.3, §11.4)
# --------------------------------------------------------------------------------------------

#: §11.3 type priority: objectId > date > timestamp > decimal > binData (subtype 4 → uuid) >
#: the rest. The rest is ordered here so that a sample always gives the same answer (the
#: contract leaves it open): regex, double, long, int, string, bool, object, array, others.
_PRIORITY: Final = (
    "objectId",
    "date",
    "timestamp",
    "decimal",
    "uuid",
    "binData",
    "regex",
    "double",
    "long",
    "int",
    "string",
    "bool",
    "object",
    "array",
    "other",
)
_RANK: Final = {name: rank for rank, name in enumerate(_PRIORITY)}

#: §11.4 MongoDB column: sampled type → family.
_FAMILY: Final = {
    "objectId": TypeFamily.TEXT,
    "date": TypeFamily.TIMESTAMPTZ,
    "timestamp": TypeFamily.TIMESTAMPTZ,
    "decimal": TypeFamily.DECIMAL,
    "uuid": TypeFamily.UUID,
    "binData": TypeFamily.BYTES,
    "double": TypeFamily.FLOAT,
    "long": TypeFamily.INTEGER,
    "int": TypeFamily.INTEGER,
    "string": TypeFamily.TEXT,
    "bool": TypeFamily.BOOLEAN,
    "object": TypeFamily.JSON,
    "array": TypeFamily.JSON,
}

_TYPE_NAMES: Final[dict[type, str]] = {
    ObjectId: "objectId",
    datetime: "date",
    DatetimeMS: "date",
    Timestamp: "timestamp",
    Decimal128: "decimal",
    Regex: "regex",
    float: "double",
    Int64: "long",
    int: "int",
    str: "string",
    bool: "bool",
    dict: "object",
    list: "array",
    bytes: "binData",
    UUID: "uuid",
}


def mongo_type_of(value: object) -> str | None:
    """The sampled type name of one value (§11.3); ``None`` for null, which never decides."""
    if value is None:
        return None
    if isinstance(value, Binary):
        return "uuid" if value.subtype == 4 and len(value) == 16 else "binData"
    name = _TYPE_NAMES.get(type(value))
    if name is not None:
        return name
    if isinstance(value, Mapping):
        return "object"
    return "other"


def sample_size(count: int) -> int | None:
    """§11.3 sample size by collection size; ``None`` means every document (≤ 1,000)."""
    if count <= 1_000:
        return None
    if count <= 10_000:
        return 1_000
    if count <= 100_000:
        return 2_000
    if count <= 1_000_000:
        return 5_000
    return 10_000


class FieldTally:
    """The §11.3 field types of one collection, folded document by document, so that a
    sample of up to 10,000 documents is never held in memory at once."""

    def __init__(self) -> None:
        self._best: dict[str, str | None] = {"_id": None}

    def add(self, document: Mapping[str, Any]) -> None:
        best = self._best
        for key, value in document.items():
            seen = mongo_type_of(value)
            current = best.get(key)
            if key not in best or (
                seen is not None and (current is None or _RANK[seen] < _RANK[current])
            ):
                best[key] = seen if seen is not None else current

    def columns(self) -> tuple[Column, ...]:
        """``_id`` first (an ObjectId when never seen), then the other keys by code point."""
        best = {**self._best, "_id": self._best["_id"] or "objectId"}
        names = ["_id", *sorted(k for k in best if k != "_id")]
        return tuple(_column(name, best[name]) for name in names)


def sampled_columns(documents: Iterable[Mapping[str, Any]]) -> tuple[Column, ...]:
    """The union of top-level keys (``_id`` always, first), typed by priority (§11.3, §11.4).

    A field seen only as null has the ``other`` family and native type ``null``.
    """
    tally = FieldTally()
    for document in documents:
        tally.add(document)
    return tally.columns()


def _column(name: str, sampled: str | None) -> Column:
    """§11.4 MongoDB column; a field seen only as null is ``other`` with native ``null``."""
    if sampled is None:
        return Column(name, TypeFamily.OTHER, "null")
    return Column(name, _FAMILY.get(sampled, TypeFamily.OTHER), sampled)


# --------------------------------------------------------------------------------------------
# Filters (§3.4, §1.4)
# --------------------------------------------------------------------------------------------

_MARKERS: Final = frozenset({"$oid", "$date", "$binary", "$numberDecimal"})


def filter_to_bson(value: object) -> Any:
    """The engine's filter document with its Extended JSON v2 value markers (``$oid``,
    ``$date``, ``$binary``, ``$numberDecimal``; §1.4) turned into BSON values.

    Only single-key marker objects are converted; operator documents such as
    ``{"$regex": …, "$options": …}`` stay query operators.
    """
    if isinstance(value, Mapping):
        if len(value) == 1 and next(iter(value)) in _MARKERS:
            return json_util.object_hook(value)
        return {key: filter_to_bson(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [filter_to_bson(item) for item in value]
    return value


_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def _coerce_number(column: Column, value: object) -> object:
    """§3.4 "Values on MongoDB fields" for numbers: on a field sampled as int/long, a
    non-integral bound value is compared as a double (never a Decimal128, so an int field
    is not compared across the decimal type) and an integer beyond int64 as a Decimal128
    (BSON has no wider integer). Other values pass unchanged."""
    if column.family is TypeFamily.INTEGER and isinstance(value, Decimal):
        return float(value)
    if type(value) is int and not _INT64_MIN <= value <= _INT64_MAX:
        return Decimal(value)
    return value


def coerce_filters(filters: Sequence[BoundFieldFilter]) -> tuple[BoundFieldFilter, ...]:
    """The bound filters with their numbers fitted to BSON (see :func:`_coerce_number`)."""
    return tuple(
        replace(
            ff,
            conditions=tuple(
                replace(c, values=tuple(_coerce_number(ff.column, v) for v in c.values))
                for c in ff.conditions
            ),
        )
        for ff in filters
    )


def flatten_filter(document: dict[str, Any]) -> dict[str, Any]:
    """``{"$and": [{a: …}, {b: …}]}`` → ``{a: …, b: …}`` when every part names its own
    plain field: the same conjunction in MongoDB (top-level fields are ANDed), in the flat form
    every server plans best (nx-27017, the test server, mis-reads ``{f: null}`` inside
    ``$and``). Any other shape is returned unchanged."""
    parts = document.get("$and")
    if len(document) != 1 or not isinstance(parts, list):
        return document
    flat: dict[str, Any] = {}
    for part in parts:
        if not isinstance(part, dict) or any(k.startswith("$") or k in flat for k in part):
            return document
        flat.update(part)
    return flat


def _projection(query: TableQuery) -> dict[str, int] | None:
    """§3.2: named fields only (``_id`` only when named); ``None`` for ``*``."""
    if _is_wildcard(query):
        return None
    projection = {}
    for column in query.columns:
        check_mongo_field(column.name)
        projection[column.name] = 1
    if "_id" not in projection:
        projection["_id"] = 0
    return projection


def _is_wildcard(query: TableQuery) -> bool:
    """``*`` (§3.2): the planner projects a wildcard as the table's own column tuple, while
    named fields always get a tuple of their own, so identity tells them apart."""
    return query.columns is query.table.columns


# --------------------------------------------------------------------------------------------
# The connector
# --------------------------------------------------------------------------------------------


class MongoConnector(NetworkConnector):
    """A read-only pymongo async session on one MongoDB database (the ``Connector`` port)."""

    _client: AsyncMongoClient[Document] | None = None

    async def __aenter__(self) -> Self:
        try:
            with map_mongo_errors(Phase.CONNECT, self._name):
                async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                    await self._open()
        except BaseException:
            await self._close()
            raise
        return self

    async def _open(self) -> None:
        """§2.9.1: keyword arguments only; the TLS files live only until the first ping."""
        with tls_files(self._connection.ssl) as files:
            options = client_options(
                self._connection, pinned_address=self._pinned_address, tls_files=files
            )
            self._client = AsyncMongoClient(**options)
            await self._client.admin.command("ping")

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._close()

    async def _close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with suppress(pymongo.errors.PyMongoError, OSError):
                await client.close()

    def _database(self, phase: Phase) -> AsyncDatabase[Document]:
        if self._client is None:
            raise engine_error(phase, self._name, "connection is not open")
        return self._client[self._connection.database]

    async def probe(self) -> None:
        """§2.6.7: ``ping``; a failure is a connect failure."""
        if self._client is None:
            raise engine_error(Phase.CONNECT, self._name, "connection is not open")
        with map_mongo_errors(Phase.CONNECT, self._name):
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                await self._client.admin.command("ping")

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        """§3.3/§11.3: every collection and view of the database (``schemas`` is ignored),
        ``system.*`` excluded, fields sampled; within 30 s."""
        return await self._discover(None)

    async def discover_tables(
        self, schemas: Sequence[str], names: Sequence[str]
    ) -> DiscoveredSchema:
        """:meth:`discover` for the collections named ``names`` only (the engine's
        ``NamedDiscovery``; collection names match exactly, §3.3): only they are sampled, not
        every collection of the database for every job."""
        return await self._discover(frozenset(names))

    async def _discover(self, names: frozenset[str] | None) -> DiscoveredSchema:
        db = self._database(Phase.DISCOVER)
        with map_mongo_errors(Phase.DISCOVER, self._name):
            async with asyncio.timeout(DISCOVERY_TIMEOUT_SECONDS):
                listed = await _list_collections(db, self._name)
                if names is not None:
                    listed = [(name, kind) for name, kind in listed if name in names]
                gate = asyncio.Semaphore(_DISCOVERY_CONCURRENCY)

                async def one(name: str, kind: str) -> TableSchema:
                    async with gate:
                        columns = await _sample(db, name, kind, self._name)
                    return TableSchema(schema="", name=name, columns=columns)

                tables = await asyncio.gather(*(one(n, k) for n, k in listed))
        return DiscoveredSchema(default_schema="", tables=tuple(tables))

    async def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        """One ``find`` streamed at most ``batch_size`` documents (and about
        ``BATCH_TARGET_BYTES``) at a time (§3.2, §3.4, §5.3)."""
        db = self._database(Phase.QUERY)
        projection = _projection(query)
        names = tuple(column.name for column in query.columns)
        with map_mongo_errors(Phase.QUERY, self._name, query.table):
            rendered = render_mongo_filter(coerce_filters(query.filters))
            find_filter = flatten_filter(filter_to_bson(rendered))
            sizer = BatchSizer(self._batch_size)
            cursor = db[query.table.name].find(find_filter, projection, batch_size=self._batch_size)
            try:
                # the server's replies are capped (16 MiB of BSON); ``to_list`` takes from them
                # no more documents than the sizer's batch
                while documents := await cursor.to_list(sizer.rows):
                    sizer.observe(documents)
                    yield _rows(documents, None if projection is None else names)
            finally:
                await cursor.close()


def _rows(documents: list[Document], names: tuple[str, ...] | None) -> Sequence[Row]:
    """The documents of one batch as rows (:func:`_encoded_rows`).

    :func:`encode_bson` recurses into embedded documents without counting levels (counting
    would cost every nested value a step): a value within ``MAX_JSON_DEPTH`` passes, one a
    little deeper is refused by the engine's document writer, and one so deep that the
    recursion runs out (a few hundred levels) is measured here: ``JsonDepthError`` naming the
    field, or, when none is deeper than the bound (the caller's stack was), the batch again on a
    fresh stack."""
    try:
        return _encoded_rows(documents, names)
    except RecursionError:
        pass
    fields = documents if names is None else [{n: d.get(n) for n in names} for d in documents]
    column = too_deep_member(fields)
    if column is not None:
        raise JsonDepthError(column=column)
    return on_fresh_stack(_encoded_rows, documents, names)


def _encoded_rows(documents: list[Document], names: tuple[str, ...] | None) -> Sequence[Row]:
    """Named fields → a batch with exactly those keys (missing → null); ``*`` → each
    document's own keys (§3.2), as a batch too when every document has the same keys in the
    same order (a uniform collection), else as ``dict`` rows.

    A batch is written by the engine's column encoder, which costs less than ``dict`` rows
    (speed, issue 12: 100 k uniform documents through ``*``, 0.76 → 0.50–0.60 s CPU). The
    orjson batch (``FastRowBatch``) was measured too and gained nothing over it here: BSON
    values are converted one by one in Python anyway, and embedded documents may hold floats,
    which it refuses."""
    if names is None:
        keys = tuple(documents[0]) if documents else ()
        if not keys or any(tuple(doc) != keys for doc in documents):
            return [{key: encode_bson(value) for key, value in doc.items()} for doc in documents]
        names = keys
    columns = [[encode_bson(doc.get(name)) for doc in documents] for name in names]
    return RowBatch(names, columns)


async def _list_collections(db: AsyncDatabase[Document], datasource: str) -> list[tuple[str, str]]:
    """``listCollections``: (name, type) of every collection and view, ``system.*`` excluded.
    An entry whose ``name`` or ``type`` is not a string is the discovery failure naming it."""
    listed: list[tuple[str, str]] = []
    cursor = await db.list_collections()
    async for info in cursor:
        name, kind = info.get("name"), info.get("type", "collection")
        if not isinstance(name, str):
            raise catalog_type_error(datasource, "listCollections.name", name)
        if not isinstance(kind, str):
            raise catalog_type_error(datasource, "listCollections.type", kind)
        if name and not name.startswith(_SYSTEM_PREFIX):
            listed.append((name, kind))
    return listed


async def _document_count(collection: Any, kind: str, datasource: str) -> int:
    """The collection's document count (a view's is counted: views have no metadata); an
    answer whose ``n`` is not an integer is the discovery failure naming it."""
    try:
        if kind == "view":
            count = await collection.count_documents({})
        else:
            count = await collection.estimated_document_count()
    except (KeyError, TypeError, ValueError):  # pymongo's int(answer["n"])
        raise catalog_type_error(datasource, "count.n", None) from None
    if isinstance(count, bool) or not isinstance(count, int):
        raise catalog_type_error(datasource, "count.n", count)
    return count


async def _sample(
    db: AsyncDatabase[Document], name: str, kind: str, datasource: str
) -> tuple[Column, ...]:
    """§11.3: every document up to 1,000, else a ``$sample`` sized by the document count;
    folded into a :class:`FieldTally` one cursor batch at a time."""
    collection = db[name]
    count = await _document_count(collection, kind, datasource)
    size = sample_size(count)
    if size is None:
        cursor: Any = collection.find({}, limit=1_000, batch_size=_SAMPLE_BATCH)
    else:
        pipeline = [{"$sample": {"size": size}}]
        cursor = await collection.aggregate(pipeline, batchSize=_SAMPLE_BATCH)
    tally = FieldTally()
    try:
        async for document in cursor:
            tally.add(document)
    finally:
        await cursor.close()
    return tally.columns()
