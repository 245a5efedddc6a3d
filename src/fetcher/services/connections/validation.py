"""Validation of connection bodies and of ``X-Product-Name`` (contract §2.4, §2.5, §2.6, §11.2).

Create (§2.6.1 steps 3-5) and PATCH (§2.6.5 steps 3 and 7) share one pipeline over a
camelCase record:

1. unknown fields → ``400 FET-0400`` (``fields`` maps each path to ``unexpected field``);
2. required fields absent, null or blank → ``400 FET-0402`` listing only the missing ones;
3. invalid values → ``400 FET-0001`` ``Bad Request`` listing every invalid field; when the
   only problems are metadata rules → FET-0410/0411/0412; when the only problem is the
   ``ssl.mode`` vocabulary → ``400 FET-0413``.

PATCH merges the body into the stored record first (§2.6.5): an absent field is unchanged,
``null`` clears ``schema``/``ssl``/``metadata`` and is invalid elsewhere, ``ssl`` and
``metadata`` replace the stored value, and a change of ``type`` to ``SQLITE`` clears the stored
``host``, ``port``, ``userName`` and ``password``. A required field *sent* blank is invalid,
not missing. Stored values that the body does not touch are re-checked only for cross-field
consistency (type support and TLS vocabulary); stored secrets are never re-validated.

The SQLITE location rule (§2.5.1) reads the file system; it is
:mod:`fetcher.services.connections.sqlite_files`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fetcher.services.api import shapes
from fetcher.services.api.shapes import SQLITE, Invalid, TypeRules, rules_of
from fetcher.services.connections.rules import (
    CREDENTIAL_PAIR,
    NETWORK_FIELDS,
    PEM_PAIR,
    REQUIRED_METADATA,
    SCHEMA_SUPPORT,
    is_blank,
    required_fields,
)
from fetcher.services.connections.sqlite_files import sqlite_location_ok
from fetcher.services.errors import (
    EMPTY_BODY_MESSAGE,
    ApiError,
    bad_request,
    invalid_header,
    invalid_payload,
    missing_fields,
)

__all__ = [
    "SQLITE_LOCATION_MESSAGE",
    "ConnectionInput",
    "SslInput",
    "check_connection_fields",
    "validate_connection_create",
    "validate_connection_patch",
    "validate_product_header",
]

#: §2.5.1 (exact).
SQLITE_LOCATION_MESSAGE = "databaseName must be a readable SQLite file in the allowed directory"

_PEM_FIELDS = {name: shapes.pem(name) for name in ("ca", "cert", "key")}
#: §2.5 body fields and the :class:`ConnectionInput` attributes that hold them.
_ATTRIBUTES = {
    name: re.sub("[A-Z]", lambda upper: "_" + upper[0].lower(), name)
    for name in shapes.CONNECTION_FIELDS
}

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SslInput:
    """Validated ``ssl`` settings. ``mode`` may be ``""`` (the off row) when PEM text is given."""

    mode: str
    ca: str | None = None
    cert: str | None = None
    key: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class ConnectionInput:
    """A validated connection (§2.5): strings trimmed except ``password`` and PEM text.

    ``password`` and ``ssl.key`` never appear in ``repr``. ``metadata`` is as sent (empty when
    none). For ``SQLITE``, ``host``, ``port``, ``user_name`` and ``password`` are ``None``.
    """

    config_name: str
    type: str
    database_name: str
    host: str | None = None
    port: int | None = None
    schema: str | None = None
    user_name: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl: SslInput | None = None
    metadata: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Context:
    """How the host runs (§2.5.1) and, for PATCH, which fields the body sent."""

    embedded: bool
    sqlite_allowed_dir: str | None
    metadata_store_path: str | None
    sent: frozenset[str] | None = None  # None on create: every present field was sent

    def was_sent(self, name: str) -> bool:
        return self.sent is None or name in self.sent


class _KeptSecret:
    """A stored password the caller did not hand over: it is kept, never re-validated."""


_KEPT = _KeptSecret()


# --- public entry points ------------------------------------------------------------------


def check_connection_fields(body: Mapping[str, object]) -> None:
    """§2.6.1 step 3 / §2.6.5 step 3: unknown top-level or ``ssl`` properties → FET-0400."""
    shapes.reject_unknown_fields(body, shapes.CONNECTION_KNOWN)


def validate_connection_create(
    body: Mapping[str, object],
    *,
    embedded: bool,
    sqlite_allowed_dir: str | None,
    metadata_store_path: str | None,
) -> ConnectionInput:
    """§2.6.1 steps 3-5 on a decoded POST body."""
    check_connection_fields(body)
    ctx = _Context(embedded, sqlite_allowed_dir, metadata_store_path)
    return _validate(dict(body), ctx, null_errors={})


def validate_connection_patch(
    stored: ConnectionInput,
    body: Mapping[str, object],
    *,
    embedded: bool,
    sqlite_allowed_dir: str | None,
    metadata_store_path: str | None,
) -> ConnectionInput:
    """§2.6.5 steps 2 (``{}``), 3 and 7: validate ``body`` merged into ``stored``.

    ``stored.password`` may be ``None`` when the caller keeps the stored ciphertext: the
    merged result then has ``password=None`` unless the body sends one. Callers re-encrypt
    only when ``"password" in body``, and clear stored credentials when the result's type is
    ``SQLITE``. ``stored.ssl.key`` may likewise be left out; ``ssl`` is replaced only when sent.
    """
    if not body:
        raise invalid_payload(EMPTY_BODY_MESSAGE)
    check_connection_fields(body)
    values, null_errors = _merge(stored, body)
    ctx = _Context(embedded, sqlite_allowed_dir, metadata_store_path, sent=frozenset(body))
    return _validate(values, ctx, null_errors=null_errors)


def validate_product_header(value: str | None, *, required: bool) -> str | None:
    """§2.4: the normalized (trimmed, lower-cased) ``X-Product-Name``, or ``None`` when an
    optional header is absent. Each violation → ``400 FET-0403`` with its exact message."""
    if value is None or not value.strip():
        if required:
            raise invalid_header("X-Product-Name header is required and must not be empty")
        if value is None:
            return None
        raise invalid_header("X-Product-Name header must not be empty or whitespace-only")
    try:
        return shapes.PRODUCT_HEADER.check(value)
    except Invalid as exc:
        raise invalid_header(exc.message) from None


# --- merge (PATCH) ------------------------------------------------------------------------


def _stored_values(stored: ConnectionInput) -> dict[str, object]:
    """The stored record in body shape; ``None`` fields and empty ``metadata`` are absent."""
    values = {name: getattr(stored, attr) for name, attr in _ATTRIBUTES.items()}
    values["metadata"] = dict(stored.metadata) or None
    if _password_stored(stored):
        values["password"] = _KEPT if stored.password is None else stored.password
    return {name: value for name, value in values.items() if value is not None}


def _password_stored(stored: ConnectionInput) -> bool:
    """Whether the stored record holds a password: every type but SQLITE, except a MONGODB
    connection stored without credentials (no ``userName``; the two go together, §2.5)."""
    rules = rules_of(stored.type)
    no_credentials = CREDENTIAL_PAIR.optional(rules) and stored.user_name is None
    return not NETWORK_FIELDS.refused(rules) and not no_credentials


def _merge(
    stored: ConnectionInput, body: Mapping[str, object]
) -> tuple[dict[str, object], dict[str, str]]:
    """§2.6.5 merge semantics. Returns the merged record and the ``cannot be null`` errors."""
    values = _stored_values(stored)
    null_errors: dict[str, str] = {}
    for name, value in body.items():
        if (
            value is None
            and name in CREDENTIAL_PAIR.pair.names
            and CREDENTIAL_PAIR.optional(_merged_rules(stored, body))
        ):
            values.pop(name, None)  # §2.5: removed; the pair rule of ``_missing`` applies
        elif value is None and name not in shapes.NULLABLE_FIELDS:
            null_errors[name] = f"{name} cannot be null"
        elif value is None:
            values.pop(name, None)
        else:
            values[name] = value
    refused = NETWORK_FIELDS.refused
    becomes_file = refused(_merged_rules(stored, body)) and not refused(rules_of(stored.type))
    if "type" in body and becomes_file:
        for name in NETWORK_FIELDS.names:
            if name not in body:
                values.pop(name, None)
    return values, null_errors


def _merged_rules(stored: ConnectionInput, body: Mapping[str, object]) -> TypeRules:
    return rules_of(_raw_type({"type": body.get("type", stored.type)}))


# --- the shared pipeline ------------------------------------------------------------------


def _validate(
    values: dict[str, object], ctx: _Context, *, null_errors: Mapping[str, str]
) -> ConnectionInput:
    missing = _missing(values, ctx)
    if missing:
        raise missing_fields(missing)
    return _Checker(values, ctx, null_errors).run()


def _raw_type(values: Mapping[str, object]) -> str | None:
    value = values.get("type")
    return value.strip() if isinstance(value, str) else None


def _missing(values: Mapping[str, object], ctx: _Context) -> list[str]:
    """§2.5 required fields (absent, null or blank), ``ssl.mode`` and Oracle ``serviceName``.

    On PATCH a field the body sent is never missing: blank or null is an invalid value there.
    """
    kind = _raw_type(values)
    rules = rules_of(kind)
    missing = [
        name
        for name in required_fields(kind)
        if not (ctx.sent is not None and name in ctx.sent) and is_blank(values.get(name))
    ]
    missing += CREDENTIAL_PAIR.missing(rules, values)
    ssl = values.get("ssl")
    if isinstance(ssl, dict) and ssl and ssl.get("mode") is None:
        missing.append("ssl.mode")
    return missing + REQUIRED_METADATA.missing(rules, values.get("metadata"))


class _Checker:
    """§2.5 step 5: collects every invalid value, then raises the one error §2.3 selects."""

    def __init__(
        self, values: Mapping[str, object], ctx: _Context, null_errors: Mapping[str, str]
    ) -> None:
        self.values = values
        self.ctx = ctx
        self.errors: dict[str, str] = dict(null_errors)
        self.metadata_issues: list[shapes.MetadataProblem] = []
        self.ssl_mode_error: str | None = None

    def check(self, path: str, rule: Callable[[object], T], value: object) -> T | None:
        """Apply ``rule``; record its message under ``path`` when it fails."""
        if path in self.errors:
            return None
        try:
            return rule(value)
        except Invalid as exc:
            self.errors[path] = exc.message
            return None

    def run(self) -> ConnectionInput:
        get = self.values.get
        config_name = self.check("configName", shapes.CONFIG_NAME.check, get("configName"))
        kind = self.check("type", self._type, get("type"))
        checked: dict[str, Any] = {
            "configName": config_name,
            "type": kind,
            "databaseName": self.check("databaseName", self._database(kind), get("databaseName")),
        }
        checked |= self._credentials(kind)
        checked["schema"] = self.check("schema", SCHEMA_SUPPORT.check(kind), get("schema"))
        checked["ssl"] = self.check("ssl", self._ssl(kind), get("ssl"))
        checked["metadata"] = self.check("metadata", self._metadata, get("metadata")) or {}
        self._raise_if_invalid()
        if any(checked[name] is None for name in ("configName", "type", "databaseName")):
            raise RuntimeError("a required connection field escaped validation")  # pragma: no cover
        return ConnectionInput(**{_ATTRIBUTES[name]: value for name, value in checked.items()})

    def _raise_if_invalid(self) -> None:
        """§2.5: FET-0001 with every invalid field; else metadata codes; else FET-0413."""
        if self.errors:
            fields = dict(self.errors)
            if self.ssl_mode_error:
                fields.setdefault("ssl.mode", self.ssl_mode_error)
            for issue in self.metadata_issues:
                fields.setdefault(issue.path, issue.message)
            raise bad_request(fields)
        if self.metadata_issues:
            raise shapes.metadata_error(self.metadata_issues)
        if self.ssl_mode_error:
            raise ApiError(
                "FET-0413", self.ssl_mode_error, fields={"ssl.mode": self.ssl_mode_error}
            )

    # -- type, credentials and database --------------------------------------------------

    def _type(self, value: object) -> str:
        text = value.strip() if isinstance(value, str) else None
        if text is None or text not in shapes.TYPES:
            raise Invalid(f"type must be one of [{' '.join(shapes.CONNECTION_TYPES)}]")
        if text == SQLITE and not self.ctx.embedded:
            raise Invalid("SQLITE connections are only supported in embedded mode")
        if text == SQLITE and not self.ctx.sqlite_allowed_dir:
            raise Invalid("SQLITE connections are disabled")
        return text

    def _credentials(self, kind: str | None) -> dict[str, object]:
        """``host``, ``port``, ``userName`` and ``password``; none of them for SQLITE."""
        if kind is None and NETWORK_FIELDS.refused(rules_of(_raw_type(self.values))):
            return {}  # SQLITE refused: the ``type`` error says it all
        rules = rules_of(kind)
        if NETWORK_FIELDS.refused(rules):
            refused = NETWORK_FIELDS.errors(kind, self.values, self.ctx.was_sent)
            for name, message in refused.items():  # after the errors found before, in order
                self.errors.setdefault(name, message)
            return {}
        get = self.values.get
        checked: dict[str, object] = {
            "host": self.check("host", shapes.HOST.check, get("host")),
            "port": self.check("port", shapes.PORT.check, get("port")),
        }
        if CREDENTIAL_PAIR.none_given(rules, self.values):
            return checked  # §2.5: a MONGODB connection without credentials
        checked["userName"] = self.check("userName", shapes.USER_NAME.check, get("userName"))
        checked["password"] = self.check("password", _password, get("password"))
        return checked

    def _database(self, kind: str | None) -> Callable[[object], str]:
        def rule(value: object) -> str:
            if rules_of(kind).file:
                return self._sqlite_database(shapes.DATABASE_PATH.check(value))
            if rules_of(_raw_type(self.values)).file:  # SQLITE refused: no path rule to apply
                return shapes.DATABASE_PATH.check(value)
            return shapes.DATABASE_NAME.check(value)

        return rule

    def _sqlite_database(self, path: str) -> str:
        if "\x00" in path:
            raise Invalid("databaseName contains invalid characters")
        allowed = self.ctx.sqlite_allowed_dir
        if allowed is None or not sqlite_location_ok(
            path, allowed_dir=allowed, metadata_store_path=self.ctx.metadata_store_path
        ):
            raise Invalid(SQLITE_LOCATION_MESSAGE)
        return path

    # -- ssl ------------------------------------------------------------------------------

    def _ssl(self, kind: str | None) -> Callable[[object], SslInput | None]:
        def rule(value: object) -> SslInput | None:
            if isinstance(value, SslInput):  # stored and untouched: consistency only
                parsed: SslInput | None = value
            elif value is None or value == {}:
                return None
            elif not isinstance(value, dict):
                raise Invalid("ssl must be an object")
            else:
                parsed = self._ssl_object(value)
            if parsed is not None and rules_of(kind).file:
                raise Invalid(f"ssl is not supported for type {kind}")
            if parsed is not None and kind is not None:
                self._check_ssl_mode(shapes.TYPES[kind].ssl_modes, parsed.mode)
            return parsed

        return rule

    def _ssl_object(self, value: Mapping[str, object]) -> SslInput | None:
        mode = self.check("ssl.mode", _ssl_mode_text, value.get("mode"))
        texts = {
            name: self.check(f"ssl.{name}", rule.check, value.get(name))
            for name, rule in _PEM_FIELDS.items()
        }
        PEM_PAIR.check(texts, self.errors)
        if mode is None:
            return None
        if mode == "" and not any(texts.values()):
            return None  # {"mode": ""} alone is stored as absent
        return SslInput(mode=mode, ca=texts["ca"], cert=texts["cert"], key=texts["key"])

    def _check_ssl_mode(self, vocabulary: tuple[str, ...], mode: str) -> None:
        if mode and mode not in vocabulary:
            self.ssl_mode_error = f"ssl.mode must be one of [{' '.join(vocabulary)}]"

    # -- metadata -------------------------------------------------------------------------

    def _metadata(self, value: object) -> dict[str, object] | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise Invalid("metadata must be an object")
        self.metadata_issues = shapes.metadata_problems(value)
        for key in shapes.RESERVED_METADATA:
            item = value.get(key)
            if item is None or isinstance(item, dict | list):
                continue
            try:
                shapes.RESERVED_VALUE.check(item)
            except Invalid as exc:
                self.errors[f"metadata.{key}"] = f"metadata.{key} {exc.message}"
        return value


# --- field rules (declared in fetcher.services.api.shapes) ------------------------------------


def _password(value: object) -> str | None:
    """A kept stored password is not re-validated."""
    return None if isinstance(value, _KeptSecret) else shapes.PASSWORD.check(value)


def _ssl_mode_text(value: object) -> str:
    if not isinstance(value, str):
        raise Invalid("ssl.mode must be a string")
    return value.strip()
