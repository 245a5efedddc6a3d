"""The one declarative description of the HTTP API's fields (contract §2.1, §2.4-§2.6, §3.2,
§3.5, §11.2).

Every field is declared once, as a :class:`Field`: its check, raising :class:`Invalid` with the
exact §2.5 message the services put into ``fields``, and the JSON Schema that ``/openapi.json``
publishes for it, both built from the same constants below. What differs per connection type is
one :class:`TypeRules` row of :data:`TYPES`, read by the cross-field rule objects of
:mod:`fetcher.services.connections.rules`; the metadata rules are one table with their schema.
The services (:mod:`fetcher.services.connections.validation`,
:mod:`fetcher.services.jobs.validation`) run the checks in the contract's order;
:mod:`fetcher.manager.openapi` assembles the schemas into the request bodies and parameters. The
hypothesis agreement tests and the schemathesis run hold each check and its schema together.

Strings a check trims admit surrounding whitespace in their schema (:data:`WS` is exactly the
set ``str.strip()`` removes), and every string schema excludes U+0000 (a §2.1 hostile value).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Generic, Literal, TypeGuard, TypeVar, cast, get_args

from fetcher.services.errors import ApiError, unexpected_fields
from fetcher.services.limits import DEFAULT_FEED_LIMIT, MAX_FEED_LIMIT, MAX_FEED_WAIT
from fetcher.services.records import EventType

Schema = dict[str, Any]
T = TypeVar("T")

# --- connection types and their rules (§2.5, §11.1, §11.2) --------------------------------

#: §2.5 connection types, in the order of the ``type`` message.
ConnectionType = Literal["POSTGRESQL", "MYSQL", "SQL_SERVER", "ORACLE", "MONGODB", "SQLITE"]
CONNECTION_TYPES: tuple[str, ...] = get_args(ConnectionType)
SQLITE = "SQLITE"


@dataclass(frozen=True, slots=True)
class TypeRules:
    """What §2.5 and §11.2 say of one ``type``; the validator's branch decisions and the
    per-type ``/openapi.json`` body both read this table (through the rule objects of
    :mod:`fetcher.services.connections.rules`), never the type names."""

    #: §11.2 TLS vocabulary, in table order (``""`` or absent selects the off row).
    ssl_modes: tuple[str, ...] = ()
    #: ``schema`` is accepted (``SCHEMA_SUPPORT``).
    schema: bool = False
    #: ``userName`` and ``password`` are optional together (``CREDENTIAL_PAIR``).
    optional_credentials: bool = False
    #: These ``metadata`` keys are required (``REQUIRED_METADATA``).
    required_metadata: tuple[str, ...] = ()
    #: ``databaseName`` is a local file (§2.5.1); no network fields (``NETWORK_FIELDS``), no
    #: ``ssl``.
    file: bool = False


TYPES: Mapping[str, TypeRules] = {
    "POSTGRESQL": TypeRules(
        ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"), schema=True
    ),
    "MYSQL": TypeRules(("false", "true", "skip-verify", "preferred")),
    "SQL_SERVER": TypeRules(("disable", "false", "true", "strict"), schema=True),
    "ORACLE": TypeRules(
        ("disable", "false", "true", "enable", "verify", "skip-verify"),
        schema=True,
        required_metadata=("serviceName",),
    ),
    "MONGODB": TypeRules(
        ("disable", "false", "true", "enable", "insecure"), optional_credentials=True
    ),
    SQLITE: TypeRules(file=True),
}
#: §11.2 vocabularies of the types that accept ``ssl``.
SSL_MODES: Mapping[str, tuple[str, ...]] = {k: r.ssl_modes for k, r in TYPES.items() if not r.file}
#: §2.5 input fields, in table order.
CONNECTION_FIELDS = (
    "configName",
    "type",
    "host",
    "port",
    "databaseName",
    "schema",
    "userName",
    "password",
    "ssl",
    "metadata",
)
SSL_FIELDS = ("mode", "ca", "cert", "key")
#: PATCH ``null`` clears these; elsewhere it is an invalid value (§2.6.5).
NULLABLE_FIELDS = frozenset({"schema", "ssl", "metadata"})
#: §2.5: metadata keys with a meaning to a driver, and their value rule.
RESERVED_METADATA = ("serviceName", "authSource")
PEM_PREFIX = "-----BEGIN"
#: An unknown (or refused) ``type`` requires every field.
_ANY_TYPE = TypeRules()


def rules_of(kind: str | None) -> TypeRules:
    """The row of ``kind``; an unknown or absent type has :data:`_ANY_TYPE`'s rules."""
    return TYPES.get(kind or "", _ANY_TYPE)


#: An object's properties: each names the properties of its value where FET-0400 looks inside
#: it too (an object), else ``None``.
KnownFields = Mapping[str, "KnownFields | None"]
#: §2.5 body (top level and ``ssl``).
CONNECTION_KNOWN: KnownFields = {
    **dict.fromkeys(CONNECTION_FIELDS),
    "ssl": dict.fromkeys(SSL_FIELDS),
}


def reject_unknown_fields(body: Mapping[str, object], known: KnownFields) -> None:
    """§2.1: properties ``known`` does not name → FET-0400, listing every such path (one
    level's own before those inside its objects)."""
    unknown = _unknown_paths(body, known, "")
    if unknown:
        raise unexpected_fields(unknown)


def _unknown_paths(body: Mapping[str, object], known: KnownFields, prefix: str) -> list[str]:
    unknown = [prefix + key for key in body if key not in known]
    for key, inner in known.items():
        value = body.get(key)
        if inner is not None and isinstance(value, dict):
            unknown += _unknown_paths(value, inner, f"{prefix}{key}.")
    return unknown


# --- limits (§2.5 metadata, §2.6.9, §3.2) -------------------------------------------------

MAX_METADATA_KEY = 100
MAX_METADATA_VALUE = 2000
#: §2.6.2: a ``metadata.<key>=<value>`` list filter's value is at most 256 characters.
MAX_METADATA_FILTER_VALUE = 256
#: §3.2: table keys and field entries are at most 256 characters.
MAX_TABLE_NAME = 256
MAX_FIELD_NAME = 256
#: §2.6.9: at most 10 datasources, 20 tables each and 50 fields per table (FET-1061).
MAX_VALIDATION_DATASOURCES = 10
MAX_VALIDATION_TABLES = 20
MAX_VALIDATION_FIELDS = 50

# --- pattern building blocks --------------------------------------------------------------

#: Exactly the characters ``str.strip()`` removes (``str.isspace``), spelled out because
#: ``\s`` differs between Python, ECMA-262 and the Rust engines that read these patterns.
WS_CHARS = "\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
WS = f"[{WS_CHARS}]"
#: Neither whitespace nor U+0000.
NW = f"[^\\x00{WS_CHARS}]"
#: Anything but U+0000.
ANY = "[^\\x00]"
NO_NUL = f"^{ANY}*$"
#: Not blank: at least one character that is neither whitespace nor U+0000.
NON_BLANK = f"^{ANY}*{NW}{ANY}*$"
#: §2.6.2: integer query parameters are 1-9 ASCII digits; §2.12: a feed cursor 1-18.
QUERY_INT_DIGITS = 9
FEED_CURSOR_PATTERN = "[0-9]{1,18}"
UUID_PATTERN = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


def trimmed(core: str, pad: str = WS) -> str:
    """A pattern for a value whose text matches ``core`` once ``pad`` is trimmed from it."""
    return f"^{pad}*{core}{pad}*$"


def string(pattern: str, **extra: Any) -> Schema:
    return {"type": "string", "pattern": pattern, **extra}


NULL: Schema = {"type": "null"}


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [NULL, schema]}


class Invalid(Exception):
    """One invalid value; ``message`` goes into the error's ``fields``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class Field(Generic[T]):
    """One field: ``check`` returns the accepted value or raises :class:`Invalid`; ``schema``
    accepts exactly the values ``check`` accepts (within what a JSON Schema can say)."""

    check: Callable[[object], T]
    schema: Schema


def _string_of(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{name} must be a string")
    return value


def text_field(
    name: str,
    max_length: int,
    *,
    min_length: int = 1,
    edge: str = NW,
    inner: str = ANY,
    chars: str | None = None,
    optional: bool = False,
    trim: bool = True,
    lower: bool = False,
    pad: str = WS,
    what: str = "",
    note: str | None = None,
) -> Field[Any]:
    """A string field, its check and its schema from one declaration.

    The check, in order: not a string; the text is trimmed (unless ``trim`` is off) and
    lower-cased (``lower``); blank: ``None`` when ``optional``, else invalid when ``min_length``
    is 1 (a value *sent* blank on PATCH, as absent or blank on create is a missing field); the
    length rule (``between`` when ``min_length`` > 1 or the text is not trimmed, else ``not
    exceed``); with ``chars``, a character outside ``inner`` (``chars`` completes the message).

    The schema: ``edge`` characters at both ends and ``inner`` ones between (``edge`` only,
    ``min_length`` to ``max_length`` times, when the two classes are one), surrounded by ``pad``;
    ``null`` and blank too when ``optional``; untrimmed text is not blank, by length. The
    description states the bounds, ``what`` the characters are, and ends with ``note``.
    """
    between = min_length > 1 or not trim
    allowed = re.compile(f"{inner}*")

    def check(value: object) -> str | None:
        if optional and value is None:
            return None
        text = _string_of(name, value).strip() if trim else _string_of(name, value)
        text = text.lower() if lower else text
        if optional and not text:
            return None
        if min_length == 1 and not text.strip():
            raise Invalid(f"{name} must not be blank")
        if between and not min_length <= len(text) <= max_length:
            raise Invalid(f"{name} must be between {min_length} and {max_length} characters")
        if len(text) > max_length:
            raise Invalid(f"{name} must not exceed {max_length} characters")
        if chars is not None and allowed.fullmatch(text) is None:
            raise Invalid(f"{name} {chars}")
        return text

    bounds = f"{min_length}-{max_length}" if between else f"≤ {max_length}"
    trimming = " (trimmed)" if trim else ""
    extra = {} if note is None else {"description": f"{bounds} characters{what}{trimming}{note}"}
    core = _text_core(edge, inner, min_length, max_length)
    if not trim:
        schema = string(NON_BLANK, minLength=min_length, maxLength=max_length, **extra)
    elif optional:
        schema = nullable(string(trimmed(f"(?:{core})?", pad), **extra))
    else:
        schema = string(trimmed(core, pad), **extra)
    return Field(check, schema)


def _text_core(edge: str, inner: str, min_length: int, max_length: int) -> str:
    """The pattern of a trimmed :func:`text_field`'s text: ``edge`` characters at both ends and
    ``inner`` ones between, or ``edge`` only, ``min_length`` to ``max_length`` times, when the
    two classes are one."""
    if edge == inner:
        return f"{edge}{{{min_length},{max_length}}}"
    return f"{edge}(?:{inner}{{0,{max_length - 2}}}{edge})?"


# --- configName, port, userName, password -------------------------------------------------

CONFIG_NAME: Field[str] = text_field(
    "configName",
    100,
    min_length=3,
    edge="[a-zA-Z0-9_-]",
    inner="[a-zA-Z0-9_-]",
    chars="can only contain alphanumeric characters, underscores, and hyphens",
    what=" of letters, digits, `_` and `-`",
    note="; unique (409).",
)


def _port(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid("port must be an integer")
    if not 1 <= value <= 65535:
        raise Invalid("port must be between 1 and 65535")
    return value


PORT = Field(_port, {"type": "integer", "minimum": 1, "maximum": 65535})
USER_NAME: Field[str] = text_field("userName", 128, note=".")


PASSWORD: Field[str] = text_field(
    "password", 1024, trim=False, note=", not blank; never trimmed, never returned."
)

# --- host (§2.5) --------------------------------------------------------------------------
# One grammar: the check accepts a text that one of HOST_FORMS accepts, and the schema is their
# anyOf, the same patterns matched by Python's re and by the ECMA-262 engines of the clients.

_HOST_MAX = 253
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_IPV4_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = f"{_IPV4_OCTET}(?:\\.{_IPV4_OCTET}){{3}}"


def _ipv6() -> str:
    """What ``ipaddress.IPv6Address`` parses, without a zone: eight groups, or fewer around one
    ``::``, the last 32 bits optionally written as a strict IPv4 literal."""
    group = "[0-9A-Fa-f]{1,4}"

    def left(count: int) -> str:
        return f"(?:{group}:){{{count - 1}}}{group}" if count else ""

    forms = [f"(?:{group}:){{7}}{group}", f"(?:{group}:){{6}}{_IPV4}"]
    for count in range(8):
        forms.append(
            f"{left(count)}::(?:{group}(?::{group}){{0,{6 - count}}})?"
            if count < 7
            else f"{left(count)}::"
        )
    for count in range(6):
        forms.append(f"{left(count)}::(?:{group}:){{0,{5 - count}}}{_IPV4}")
    return "(?:" + "|".join(forms) + ")"


@dataclass(frozen=True, slots=True)
class HostForm:
    """One form of a §2.5 ``host``: its text matches ``core``, is at most ``max_length``
    characters, and does not match ``refused`` (a pattern of the published, padded text)."""

    core: str
    max_length: int | None = None
    refused: str | None = None

    def accepts(self, text: str) -> bool:
        if self.max_length is not None and len(text) > self.max_length:
            return False
        if self.refused is not None and _matches(self.refused, text):
            return False
        return _matches(self.core, text)

    @property
    def schema(self) -> Schema:
        """The form as JSON Schema for the trimmed value (the check strips before it asks)."""
        schema: Schema = {"type": "string"}
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        schema["pattern"] = trimmed(self.core)
        if self.refused is not None:
            schema["not"] = {"pattern": self.refused}
        return schema


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _matches(pattern: str, text: str) -> bool:
    return _compiled(pattern).fullmatch(text) is not None


#: §2.5: an IPv4 literal; an RFC 1123 name (one trailing dot allowed) whose last label is not
#: all digits (resolvers read ``127.1`` or ``2130706433`` as a legacy IPv4 form, which is not a
#: valid literal); or an IPv6 literal without brackets or zone.
HOST_FORMS = (
    HostForm(_IPV4),
    HostForm(
        f"{_LABEL}(?:\\.{_LABEL})*\\.?",
        max_length=_HOST_MAX,
        refused=f"^(?:{WS}*|.*\\.)[0-9]+\\.?{WS}*$",
    ),
    HostForm(_ipv6()),
)


def is_valid_host(host: str) -> bool:
    """§2.5 ``host``: ``host`` (already trimmed) is one of :data:`HOST_FORMS`."""
    return any(form.accepts(host) for form in HOST_FORMS)


def _host(value: object) -> str:
    if not isinstance(value, str) or not is_valid_host(value.strip()):
        raise Invalid("host must be a valid hostname or IP address")
    return value.strip()


HOST = Field(
    _host,
    {
        "description": (
            f"An RFC 1123 hostname (≤ {_HOST_MAX} characters, one trailing dot allowed, last "
            "label not all digits), an IPv4 literal, or an IPv6 literal without brackets "
            "(trimmed)."
        ),
        "anyOf": [form.schema for form in HOST_FORMS],
    },
)

# --- databaseName and schema (§2.5) -------------------------------------------------------

#: No ``?``, ``#``, ``;``, ``=``, ``/``, NUL, or whitespace other than a space (U+0020), which a
#: database name may contain inside.
_DB_FORBIDDEN = "?#;=/\\x00"
_WS_NOT_SPACE = WS_CHARS.replace("\x1c-\x20", "\x1c-\x1f")
DATABASE_NAME_MAX = 255
DATABASE_NAME: Field[str] = text_field(
    "databaseName",
    DATABASE_NAME_MAX,
    edge=f"[^{_DB_FORBIDDEN}{WS_CHARS}]",
    inner=f"[^{_DB_FORBIDDEN}{_WS_NOT_SPACE}]",
    chars="contains invalid characters",
    note="; no `?`, `#`, `;`, `=`, `/`, NUL, or whitespace other than a space. For ORACLE a "
    "label only.",
)
#: The length rule every type shares, without the character rule (a SQLITE path has its own).
DATABASE_PATH: Field[str] = text_field("databaseName", DATABASE_NAME_MAX)
SQLITE_PATH_SCHEMA = string(
    trimmed(f"/{ANY}{{0,{DATABASE_NAME_MAX - 2}}}{NW}"),
    description=(
        "The absolute path of a readable SQLite file inside SQLITE_ALLOWED_DIR (not the "
        "metadata store); otherwise 400 FET-0001."
    ),
)


#: Blank means none; the type rule (:attr:`TypeRules.schema`) is the caller's.
SCHEMA: Field[str | None] = text_field("schema", 128, optional=True, note="; blank means none.")

# --- ssl PEM texts and reserved metadata values (§2.5, §11.2) -----------------------------


def pem(name: str) -> Field[str | None]:
    """``ssl.<name>``: ``null`` or ``""`` for none, else PEM text (never trimmed)."""

    def check(value: object) -> str | None:
        if value is None or value == "":
            return None
        text = _string_of(f"ssl.{name}", value)
        if not text.startswith(PEM_PREFIX):
            raise Invalid(f"ssl.{name} must be PEM text beginning with {PEM_PREFIX}")
        return text

    schema = string(f"^{PEM_PREFIX}{ANY}*$", description="PEM text beginning with `-----BEGIN`.")
    return Field(check, schema)


_RESERVED_CHARS = "[A-Za-z0-9_.$-]{1,128}"
_RESERVED_VALUE = re.compile(_RESERVED_CHARS)


def _reserved(value: object) -> str:
    if not isinstance(value, str) or _RESERVED_VALUE.fullmatch(value) is None:
        raise Invalid("contains invalid characters")
    return value


#: ``metadata.serviceName``/``metadata.authSource`` values (the check's message is completed
#: with the path by the caller).
RESERVED_VALUE = Field(_reserved, string(f"^{_RESERVED_CHARS}$"))

# --- the ``schemas`` query parameter of GET …/schema (§2.6.8) -----------------------------

MAX_SCHEMAS_PARAM = 20
#: One name: anything but a comma, non-blank after trimming.
_SCHEMA_NAME = f"[^,]*[^,{WS_CHARS}][^,]*"


def _schemas(value: object) -> list[str]:
    """1-20 comma-separated names, each trimmed and non-blank; duplicates are dropped."""
    names = [name.strip() for name in _string_of("schemas", value).split(",")]
    if not 1 <= len(names) <= MAX_SCHEMAS_PARAM or not all(names):
        raise Invalid(
            f"schemas must be a comma-separated list of 1 to {MAX_SCHEMAS_PARAM} non-blank schema "
            "names"
        )
    return list(dict.fromkeys(names))


SCHEMAS_PARAM = Field(
    _schemas,
    string(f"^{_SCHEMA_NAME}(?:,{_SCHEMA_NAME}){{0,{MAX_SCHEMAS_PARAM - 1}}}$"),
)

# --- the mappedFields tree ``{configName: {table: [field, …]}}`` (§2.6.9, §3.2) -----------
# The job (§3.6 steps 5 and 7) and validate-schema (§2.6.9) run these rules in their own
# contract order and with their own messages; the tree's JSON Schema is one for both.

#: §3.2 names: non-blank, no leading or trailing whitespace.
_NAME = f"^{NW}(?:{ANY}*{NW})?$"


def name_problem(name: str) -> Literal["blank", "padded"] | None:
    """Why ``name`` breaks the §3.2 name rule (the schema's :data:`_NAME`), if it does."""
    if not name.strip():
        return "blank"
    return "padded" if name != name.strip() else None


def is_field_list(entries: object) -> TypeGuard[list[str]]:
    """A leaf of the tree: an array of strings."""
    return isinstance(entries, list) and all(isinstance(entry, str) for entry in entries)


def wildcard_problem(ds: str, table: str, entries: Sequence[str]) -> str | None:
    """§3.2: ``*`` must be the only entry (FET-0401 with this message otherwise)."""
    if "*" in entries and len(entries) > 1:
        return f"wildcard '*' must be the only entry in the field list for '{ds}.{table}'"
    return None


def mapped_fields_schema(max_ds: int, max_tables: int, max_fields: int, *, job: bool) -> Schema:
    """Bounded counts, non-blank unpadded names and ``*`` alone; a job's tree (§3.2) also bounds
    table and field names and needs a table with fields in every datasource."""
    table_bound: Schema = {"maxLength": MAX_TABLE_NAME} if job else {}
    field_bound: Schema = {"maxLength": MAX_FIELD_NAME} if job else {}
    fields: Schema = {
        "type": "array",
        "maxItems": max_fields,
        "items": string(_NAME, **field_bound),
        "anyOf": [{"const": ["*"]}, {"items": {"not": {"const": "*"}}}],
    }
    tables: Schema = {
        "type": "object",
        "maxProperties": max_tables,
        "propertyNames": {"pattern": _NAME, **table_bound},
        "additionalProperties": fields,
    }
    if job:
        tables["not"] = {"additionalProperties": {"maxItems": 0}}
    return {
        "type": "object",
        "minProperties": 1,
        "maxProperties": max_ds,
        "propertyNames": {"pattern": _NAME},
        "additionalProperties": tables,
    }


# --- metadata (§2.2, §2.5, §3.1) -----------------------------------------------------------

#: §2.1: integer literals have at most 19 digits.
_MAX_INT = 10**19 - 1
#: A JSON scalar as the §2.1 parser admits it.
SCALAR: Schema = {
    "type": ["string", "number", "boolean", "null"],
    "pattern": NO_NUL,
    "minimum": -_MAX_INT,
    "maximum": _MAX_INT,
}


@dataclass(frozen=True, slots=True)
class MetadataProblem:
    """One §2.2 metadata violation: its FET code, its ``metadata.<key>`` path and message."""

    code: str
    path: str
    message: str


#: §2.5 metadata rules in check order: ``(code, message, broken(key, value))``.
_METADATA_RULES: tuple[tuple[str, str, Callable[[str, object], bool]], ...] = (
    (
        "FET-0412",
        f"metadata key must be 1 to {MAX_METADATA_KEY} characters",
        lambda key, _: not 1 <= len(key) <= MAX_METADATA_KEY,
    ),
    (
        "FET-0410",
        "metadata value must be a string, number, boolean or null",
        lambda _, value: isinstance(value, dict | list),
    ),
    (
        "FET-0411",
        f"metadata value must not exceed {MAX_METADATA_VALUE} characters",
        lambda _, value: isinstance(value, str) and len(value) > MAX_METADATA_VALUE,
    ),
)


def metadata_problems(metadata: Mapping[str, object]) -> list[MetadataProblem]:
    """§2.5 metadata rules, each key in order; at most one problem (the first rule) per key."""
    problems: list[MetadataProblem] = []
    for key, value in metadata.items():
        for code, message, broken in _METADATA_RULES:
            if broken(key, value):
                problems.append(MetadataProblem(code, f"metadata.{key}", message))
                break
    return problems


def metadata_error(problems: list[MetadataProblem]) -> ApiError:
    """The error for the first problem's code, listing every key with that same code."""
    same = [p for p in problems if p.code == problems[0].code]
    return ApiError(same[0].code, same[0].message, fields={p.path: p.message for p in same})


def metadata_schema(properties: Schema | None = None, required: list[str] | None = None) -> Schema:
    """A flat metadata map: keys 1-100 characters, scalar values (strings ≤ 2000)."""
    schema: Schema = {
        "type": "object",
        "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY, "pattern": NO_NUL},
        "additionalProperties": {"type": SCALAR["type"], "maxLength": MAX_METADATA_VALUE, **SCALAR},
    }
    if required:
        schema["required"] = required
    if properties:
        schema["properties"] = properties
    return schema


def _source(value: object) -> str:
    """§3.6 step 10: a non-blank string; the owning product is its trimmed lower-case text."""
    if not isinstance(value, str) or not value.strip():
        raise Invalid("metadata.source must be a non-empty string")
    return value.strip().lower()


#: §3.1 ``metadata.source`` (absent is step 9's rule; its length the metadata value rule's).
SOURCE = Field(
    _source,
    string(
        NON_BLANK,
        maxLength=MAX_METADATA_VALUE,
        description="The owning product (compared trimmed and lower-cased).",
    ),
)

# --- X-Product-Name (§2.4) ----------------------------------------------------------------

MAX_PRODUCT = 100
#: Trimmed and lower-cased; the §2.4 messages in their order. After HTTP parsing, only the
#: characters a header value can carry surround it. Blank values are the caller's.
PRODUCT_HEADER: Field[str] = text_field(
    "X-Product-Name",
    MAX_PRODUCT,
    edge="[A-Za-z0-9_-]",
    inner="[A-Za-z0-9_-]",
    chars="can only contain alphanumeric characters, underscores, and hyphens",
    lower=True,
    pad="[ \t\x85\xa0]",
)


# --- query parameters of the list routes (§2.6.2) and the event feed (§2.12) ---------------


@dataclass(frozen=True, slots=True)
class QueryParam(Generic[T]):
    """One query parameter: ``parse`` maps its text (``None`` when absent) to its value or
    raises the :class:`ApiError` of its rule (FET-0405 to FET-0408, the contract's message);
    ``schema`` accepts exactly the texts ``parse`` accepts; ``description`` is published too."""

    name: str
    parse: Callable[[str | None], T]
    schema: Schema
    description: str
    #: §2.6.2 treats an empty value as absent (``schema`` admits it); §2.12 as malformed.
    empty_absent: bool = True

    def read(self, params: Mapping[str, str]) -> T:
        raw = params.get(self.name)
        return self.parse(None if self.empty_absent and raw == "" else raw)


def _optional(parse: Callable[[str], T]) -> Callable[[str | None], T | None]:
    return lambda raw: None if raw is None else parse(raw)


def _defaulted(parse: Callable[[str], T], default: object) -> Callable[[str | None], T]:
    """An absent value is ``default``, checked like a sent one."""
    return lambda raw: parse(str(default) if raw is None else raw)


def _or_empty(pattern: str, empty_absent: bool = True) -> str:
    """``pattern`` (``^…$``) that also admits the empty value where that means absent."""
    return f"^(?:{pattern[1:-1]})?$" if empty_absent else pattern


def int_range_pattern(low: int, high: int, *, max_digits: int = QUERY_INT_DIGITS) -> str:
    """A pattern for the decimal integers ``low..high`` in the §2.1 form: ASCII digits only,
    leading zeros allowed, at most ``max_digits`` digits in all."""
    high = min(high, 10**max_digits - 1)
    if low > high:
        raise ValueError("empty range")
    alternatives = []
    for width in range(len(str(low)), len(str(high)) + 1):
        start = max(low, 10 ** (width - 1) if width > 1 else 0)
        stop = min(high, 10**width - 1)
        if start > stop:
            continue
        zeros = max_digits - width
        prefix = f"0{{0,{zeros}}}" if zeros else ""
        alternatives += [prefix + body for body in _same_width(str(start), str(stop))]
    return "^(?:" + "|".join(alternatives) + ")$"


def _same_width(low: str, high: str) -> list[str]:
    """Patterns for the digit strings ``low..high`` of one width (no leading-zero padding)."""
    if len(low) == 1:
        return [_digit_class(low, high)]
    if low[0] == high[0]:
        return [low[0] + rest for rest in _same_width(low[1:], high[1:])]
    tail = len(low) - 1
    parts = []
    if low[1:] == "0" * tail:
        first = low[0]
    else:
        parts += [low[0] + rest for rest in _same_width(low[1:], "9" * tail)]
        first = str(int(low[0]) + 1)
    last = high[0] if high[1:] == "9" * tail else str(int(high[0]) - 1)
    if first <= last:
        parts.append(_digit_class(first, last) + f"[0-9]{{{tail}}}")
    if high[1:] != "9" * tail:
        parts += [high[0] + rest for rest in _same_width("0" * tail, high[1:])]
    return parts


def _digit_class(low: str, high: str) -> str:
    return low if low == high else f"[{low}-{high}]"


_QUERY_INT = re.compile(f"[0-9]{{1,{QUERY_INT_DIGITS}}}")
MAX_QUERY_INT = 10**QUERY_INT_DIGITS - 1


def _query_int(
    name: str,
    low: int,
    high: int,
    default: int,
    description: str,
    *,
    empty_absent: bool = True,
    page_size: bool = False,
) -> QueryParam[int]:
    """``low..high`` in the §2.1 integer form (1-9 ASCII digits), else FET-0405; but a
    ``page_size`` over its maximum ``high`` is FET-0406 (§2.6.2, §2.12: page sizes are the only
    parameters with a code for "over"). Absent is ``default``."""
    if low == 1:
        wrong = f"{name} must be a positive integer"
    else:
        wrong = f"{name} must be an integer from {low} to {high}"
    ceiling = MAX_QUERY_INT if page_size else high

    def parse(raw: str) -> int:
        if _QUERY_INT.fullmatch(raw) is None or not low <= int(raw) <= ceiling:
            raise ApiError("FET-0405", wrong)
        if int(raw) > high:
            raise ApiError(
                "FET-0406",
                f"The pagination limit exceeds the maximum allowed of {high} items per page. "
                "Please verify the limit and try again.",
            )
        return int(raw)

    schema = string(_or_empty(int_range_pattern(low, high), empty_absent))
    return QueryParam(name, _defaulted(parse, default), schema, description, empty_absent)


#: §2.6.2: ``page × limit`` must not exceed 2^31 (FET-0405).
PAGE_PRODUCT_EXPONENT = 31
DEFAULT_PAGE_LIMIT = 10


@functools.cache
def list_limit(max_limit: int) -> QueryParam[int]:
    """§2.6.2 ``limit``: 1..``MAX_PAGINATION_LIMIT``; the default is checked against it too."""
    return _query_int(
        "limit",
        1,
        max_limit,
        DEFAULT_PAGE_LIMIT,
        f"Page size 1..{max_limit} (MAX_PAGINATION_LIMIT), default {DEFAULT_PAGE_LIMIT}. Not an "
        f"integer → FET-0405; over {max_limit} → FET-0406.",
        page_size=True,
    )


PAGE = _query_int(
    "page",
    1,
    MAX_QUERY_INT,
    1,
    f"Page number ≥ 1, default 1. `page × limit` > 2^{PAGE_PRODUCT_EXPONENT} → FET-0405.",
)
SORT_ORDERS = ("asc", "desc")


def _sort_order(raw: str) -> Literal["asc", "desc"]:
    sort = raw.lower()
    if sort not in SORT_ORDERS:
        raise ApiError("FET-0407", "sortOrder must be " + " or ".join(SORT_ORDERS))
    return cast(Literal["asc", "desc"], sort)


SORT_ORDER = QueryParam(
    "sortOrder",
    _defaulted(_sort_order, "desc"),
    string("^(?:" + "|".join("".join(f"[{c.upper()}{c}]" for c in o) for o in SORT_ORDERS) + ")?$"),
    "`asc` or `desc` (case-insensitive) by createdAt, then id; default `desc`.",
)
LIST_TYPE: QueryParam[str | None] = QueryParam(
    "type",
    lambda raw: raw,
    {"type": "string"},
    "Case-insensitive connection type; an unknown one matches nothing.",
)
#: ``YYYY-MM-DD``, year 0000 left out: RFC 3339's full-date (``format: date``) admits it, but it
#: has no Python date, so the parser refuses it (FET-0408) and the published pattern says so.
_DATE = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-[0-9]{2}-[0-9]{2}"


#: The last day a list's date parameter may name (issue 33): a window runs to the midnight
#: after its end day, and Python has no 10000-01-01.
LATEST_LISTED_DAY = date(9999, 12, 30)


def _date_param(name: str, description: str) -> QueryParam[date | None]:
    """A ``YYYY-MM-DD`` calendar date, else FET-0408."""

    def parse(raw: str) -> date:
        try:
            if re.fullmatch(_DATE, raw) is None:
                raise ValueError(raw)
            day = date.fromisoformat(raw)
        except ValueError:
            raise ApiError("FET-0408", f"{name} must be a date in the format YYYY-MM-DD") from None
        if day > LATEST_LISTED_DAY:  # its next midnight, the exclusive end, must exist
            raise ApiError("FET-0408", f"{name} must not be after {LATEST_LISTED_DAY}")
        return day

    schema = {
        "anyOf": [
            {"type": "string", "maxLength": 0},
            {
                "type": "string",
                "format": "date",
                "pattern": f"^{_DATE}$",
                "not": {"const": (LATEST_LISTED_DAY + timedelta(days=1)).isoformat()},
            },
        ]
    }
    return QueryParam(name, _optional(parse), schema, description)


START_DATE = _date_param("startDate", "YYYY-MM-DD (UTC): createdAt ≥ that day. Else FET-0408.")
END_DATE = _date_param(
    "endDate",
    "YYYY-MM-DD (UTC): createdAt < the next day. Else FET-0408; before startDate → FET-0409.",
)


def list_params(max_limit: int) -> tuple[QueryParam[Any], ...]:
    """The §2.6.2 parameters, in the order they are checked and published."""
    return (list_limit(max_limit), PAGE, SORT_ORDER, LIST_TYPE, START_DATE, END_DATE)


#: §2.6.2 ``metadata.<key>=<value>`` filters (the prefix; several are ANDed).
METADATA_FILTER_PREFIX = "metadata."


def metadata_filters(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The non-empty ``metadata.<key>`` filters in order; a key over :data:`MAX_METADATA_KEY`
    or a value over :data:`MAX_METADATA_FILTER_VALUE` characters → FET-0405."""
    pairs: list[tuple[str, str]] = []
    for name, value in items:
        if not name.startswith(METADATA_FILTER_PREFIX) or not value:
            continue
        key = name.removeprefix(METADATA_FILTER_PREFIX)
        if not 1 <= len(key) <= MAX_METADATA_KEY or len(value) > MAX_METADATA_FILTER_VALUE:
            raise ApiError(
                "FET-0405",
                f"metadata filter keys are 1-{MAX_METADATA_KEY} and values at most "
                f"{MAX_METADATA_FILTER_VALUE} characters",
            )
        pairs.append((key, value))
    return pairs


def _feed_cursor(raw: str) -> int:
    if re.fullmatch(FEED_CURSOR_PATTERN, raw) is None:
        raise ApiError("FET-0405", "after must be a feed cursor")
    return int(raw)


EVENT_TYPES: tuple[EventType, ...] = get_args(EventType)


def _event_type(raw: str) -> EventType:
    if raw not in EVENT_TYPES:
        raise ApiError("FET-0405", "type must be " + " or ".join(EVENT_TYPES))
    return raw


FEED_AFTER = QueryParam(
    "after",
    _optional(_feed_cursor),
    string(f"^{FEED_CURSOR_PATTERN}$"),
    f"Only events after this cursor (`^{FEED_CURSOR_PATTERN}$`).",
    empty_absent=False,
)
FEED_LIMIT = _query_int(
    "limit",
    1,
    MAX_FEED_LIMIT,
    DEFAULT_FEED_LIMIT,
    f"1..{MAX_FEED_LIMIT} (default {DEFAULT_FEED_LIMIT}); over {MAX_FEED_LIMIT} → FET-0406.",
    empty_absent=False,
    page_size=True,
)
FEED_TYPE = QueryParam(
    "type",
    _optional(_event_type),
    {"type": "string", "enum": list(EVENT_TYPES)},
    " or ".join(f"`{kind}`" for kind in EVENT_TYPES) + ".",
    empty_absent=False,
)
FEED_WAIT = _query_int(
    "wait",
    0,
    MAX_FEED_WAIT,
    0,
    f"Long-poll: wait up to 0..{MAX_FEED_WAIT} seconds for a matching event before answering.",
    empty_absent=False,
)
#: §2.12 event-feed parameters, in the order they are checked (empty values are malformed).
FEED_PARAMS = (FEED_AFTER, FEED_LIMIT, FEED_TYPE, FEED_WAIT)
