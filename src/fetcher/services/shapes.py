"""The one declarative description of the HTTP API's fields (contract §2.1, §2.4-§2.6, §3.2,
§3.5, §11.2).

Every field is declared once, as a :class:`Field`: its check, raising :class:`Invalid` with the
exact §2.5 message the services put into ``fields``, and the JSON Schema that ``/openapi.json``
publishes for it, both built from the same constants below. What differs per connection type is
one :class:`TypeRules` row of :data:`TYPES`; the metadata rules are one table with their schema.
The services (:mod:`fetcher.services.connection_validation`,
:mod:`fetcher.services.job_validation`) run the checks in the contract's order;
:mod:`fetcher.manager.openapi` assembles the schemas into the request bodies and parameters. The
hypothesis agreement tests and the schemathesis run hold each check and its schema together.

Strings a check trims admit surrounding whitespace in their schema (:data:`WS` is exactly the
set ``str.strip()`` removes), and every string schema excludes U+0000 (a §2.1 hostile value).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeGuard, TypeVar, get_args

from fetcher.services.errors import ApiError

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
    per-type ``/openapi.json`` body both read this table, never the type names."""

    #: §11.2 TLS vocabulary, in table order (``""`` or absent selects the off row).
    ssl_modes: tuple[str, ...] = ()
    #: ``schema`` is accepted (POSTGRESQL, SQL_SERVER and ORACLE only).
    schema: bool = False
    #: MONGODB: ``userName`` and ``password`` are optional together (no authentication).
    optional_credentials: bool = False
    #: ORACLE: these ``metadata`` keys are required (non-blank strings).
    required_metadata: tuple[str, ...] = ()
    #: SQLITE: ``databaseName`` is a local file (§2.5.1); no network fields, no ``ssl``.
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
#: Fields a SQLITE connection refuses (it has no server).
NETWORK_FIELDS = ("host", "port", "userName", "password")
#: On MONGODB, ``userName`` and ``password`` are optional together.
CREDENTIALS = ("userName", "password")
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


def required_fields(kind: str | None) -> list[str]:
    """§2.5: the top-level fields ``kind`` requires (absent, null or blank → FET-0402), in
    table order; ``required_metadata`` adds ``metadata.<key>``."""
    rules = rules_of(kind)
    left_out = {
        *NULLABLE_FIELDS,
        *(NETWORK_FIELDS if rules.file else ()),
        *(CREDENTIALS if rules.optional_credentials else ()),
    }
    return [name for name in CONNECTION_FIELDS if name not in left_out]


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
#: §2.6.2: integer query parameters are 1-9 ASCII digits; §2.12: a feed cursor 1-18.
QUERY_INT_DIGITS = 9
FEED_CURSOR_PATTERN = "[0-9]{1,18}"
UUID_PATTERN = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


def trimmed(core: str) -> str:
    """A pattern for a value whose trimmed text matches ``core``."""
    return f"^{WS}*{core}{WS}*$"


def bounded_text(max_length: int) -> str:
    """Trimmed, non-blank text of at most ``max_length`` characters after trimming."""
    return trimmed(f"{NW}(?:{ANY}{{0,{max_length - 2}}}{NW})?")


def string(pattern: str, **extra: Any) -> Schema:
    return {"type": "string", "pattern": pattern, **extra}


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


def _bounded(name: str, max_length: int, *, description: str) -> Field[str]:
    """A trimmed, non-blank string of at most ``max_length`` characters (a blank value here
    was *sent* blank on PATCH; absent or blank on create is a missing field)."""

    def check(value: object) -> str:
        text = _string_of(name, value).strip()
        if not text:
            raise Invalid(f"{name} must not be blank")
        if len(text) > max_length:
            raise Invalid(f"{name} must not exceed {max_length} characters")
        return text

    return Field(check, string(bounded_text(max_length), description=description))


# --- configName, port, userName, password -------------------------------------------------

_NAME_CHARS = "[a-zA-Z0-9_-]"
_CONFIG_NAME = re.compile(f"{_NAME_CHARS}+")


def _config_name(value: object) -> str:
    text = _string_of("configName", value).strip()
    if not 3 <= len(text) <= 100:
        raise Invalid("configName must be between 3 and 100 characters")
    if _CONFIG_NAME.fullmatch(text) is None:
        raise Invalid(
            "configName can only contain alphanumeric characters, underscores, and hyphens"
        )
    return text


CONFIG_NAME = Field(
    _config_name,
    string(
        trimmed(f"{_NAME_CHARS}{{3,100}}"),
        description="3-100 characters of letters, digits, `_` and `-` (trimmed); unique (409).",
    ),
)


def _port(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid("port must be an integer")
    if not 1 <= value <= 65535:
        raise Invalid("port must be between 1 and 65535")
    return value


PORT = Field(_port, {"type": "integer", "minimum": 1, "maximum": 65535})
USER_NAME = _bounded("userName", 128, description="≤ 128 characters (trimmed).")


def _password(value: object) -> str:
    """Never trimmed."""
    text = _string_of("password", value)
    if not text.strip():
        raise Invalid("password must not be blank")
    if not 1 <= len(text) <= 1024:
        raise Invalid("password must be between 1 and 1024 characters")
    return text


PASSWORD = Field(
    _password,
    string(
        f"^{ANY}*{NW}{ANY}*$",
        minLength=1,
        maxLength=1024,
        description="1-1024 characters, not blank; never trimmed, never returned.",
    ),
)

# --- host (§2.5) --------------------------------------------------------------------------

_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_LABEL = re.compile(_LABEL)
_IPV4_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = f"{_IPV4_OCTET}(?:\\.{_IPV4_OCTET}){{3}}"


def _parses(kind: Callable[[str], object], text: str) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


def is_valid_host(host: str) -> bool:
    """§2.5 ``host``: an RFC 1123 name (one trailing dot allowed), IPv4, or bracket-less IPv6.

    A name whose last label is all digits is rejected: resolvers read such text as an IPv4
    address in a legacy form (``127.1``, ``2130706433``), which is not a valid literal.
    """
    if not host or len(host) > 253:
        return False
    if ":" in host:
        return "%" not in host and _parses(ipaddress.IPv6Address, host)
    if _parses(ipaddress.IPv4Address, host):
        return True
    labels = (host[:-1] if host.endswith(".") else host).split(".")
    if not all(_HOST_LABEL.fullmatch(label) for label in labels):
        return False
    return not labels[-1].isdigit()


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


def _host(value: object) -> str:
    if not isinstance(value, str) or not is_valid_host(value.strip()):
        raise Invalid("host must be a valid hostname or IP address")
    return value.strip()


HOST = Field(
    _host,
    {
        "description": (
            "An RFC 1123 hostname (≤ 253 characters, one trailing dot allowed, last label not "
            "all digits), an IPv4 literal, or an IPv6 literal without brackets (trimmed)."
        ),
        "anyOf": [
            string(trimmed(_IPV4)),
            {
                "type": "string",
                "maxLength": 253,
                "pattern": trimmed(f"{_LABEL}(?:\\.{_LABEL})*\\.?"),
                "not": {"pattern": f"^(?:{WS}*|.*\\.)[0-9]+\\.?{WS}*$"},
            },
            string(trimmed(_ipv6())),
        ],
    },
)

# --- databaseName and schema (§2.5) -------------------------------------------------------

_DB_FORBIDDEN = "?#;=/\x00"
#: Whitespace other than the space (U+0020), which a database name may contain inside.
_WS_NOT_SPACE = WS_CHARS.replace("\x1c-\x20", "\x1c-\x1f")
_DB_FORBIDDEN_CLASS = _DB_FORBIDDEN.replace("\x00", "\\x00")
_DB_EDGE = f"[^{_DB_FORBIDDEN_CLASS}{WS_CHARS}]"
_DB_INNER = f"[^{_DB_FORBIDDEN_CLASS}{_WS_NOT_SPACE}]"
DATABASE_NAME_MAX = 255


def database_name_text(value: object) -> str:
    """The length rule every type shares (the SQLITE path rule and the character rule follow)."""
    text = _string_of("databaseName", value).strip()
    if not text:
        raise Invalid("databaseName must not be blank")
    if len(text) > DATABASE_NAME_MAX:
        raise Invalid(f"databaseName must not exceed {DATABASE_NAME_MAX} characters")
    return text


def database_name_chars(text: str) -> str:
    """No ``?``, ``#``, ``;``, ``=``, ``/``, NUL, or whitespace other than a space."""
    if any(c in _DB_FORBIDDEN or (c.isspace() and c != " ") for c in text):
        raise Invalid("databaseName contains invalid characters")
    return text


DATABASE_NAME = Field(
    lambda value: database_name_chars(database_name_text(value)),
    string(
        trimmed(f"{_DB_EDGE}(?:{_DB_INNER}{{0,253}}{_DB_EDGE})?"),
        description=(
            "≤ 255 characters (trimmed); no `?`, `#`, `;`, `=`, `/`, NUL, or whitespace other "
            "than a space. For ORACLE a label only."
        ),
    ),
)
SQLITE_PATH_SCHEMA = string(
    trimmed(f"/{ANY}{{0,253}}{NW}"),
    description=(
        "The absolute path of a readable SQLite file inside SQLITE_ALLOWED_DIR (not the "
        "metadata store); otherwise 400 FET-0001."
    ),
)


def _schema(value: object) -> str | None:
    """Blank means none; the type rule (:data:`SCHEMA_TYPES`) is the caller's."""
    if value is None:
        return None
    text = _string_of("schema", value).strip()
    if len(text) > 128:
        raise Invalid("schema must not exceed 128 characters")
    return text or None


SCHEMA = Field(
    _schema,
    {
        "anyOf": [
            {"type": "null"},
            string(
                trimmed(f"(?:{NW}(?:{ANY}{{0,126}}{NW})?)?"),
                description="≤ 128 characters (trimmed); blank means none.",
            ),
        ]
    },
)

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
        raise Invalid("schemas must be a comma-separated list of 1 to 20 non-blank schema names")
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


# --- X-Product-Name (§2.4) ----------------------------------------------------------------

_PRODUCT = re.compile(r"[a-z0-9_-]+")


def _product(value: object) -> str:
    """Trimmed and lower-cased; the §2.4 messages in their order."""
    text = _string_of("X-Product-Name", value).strip().lower()
    if len(text) > 100:
        raise Invalid("X-Product-Name must not exceed 100 characters")
    if _PRODUCT.fullmatch(text) is None:
        raise Invalid(
            "X-Product-Name can only contain alphanumeric characters, underscores, and hyphens"
        )
    return text


#: After HTTP parsing: 1-100 characters of ``[A-Za-z0-9_-]`` (lower-cased by the server); the
#: characters a header value can carry around it are allowed. Blank values are the caller's.
PRODUCT_HEADER = Field(_product, string("^[ \t\x85\xa0]*[A-Za-z0-9_-]{1,100}[ \t\x85\xa0]*$"))
