"""The cross-field and per-type connection rules (contract §2.5, §2.6.5), each stated once.

A rule is one object: the check the validator (:mod:`fetcher.services.connections.validation`)
runs at its step of the §2.5 pipeline, with the exact message and ``fields`` path, and the JSON
Schema fragment ``/openapi.json`` publishes for it (:mod:`fetcher.manager.openapi`). Which types
a rule applies to is a column of :data:`~fetcher.services.api.shapes.TYPES`; only these objects read
those columns, never a type name.

* :data:`PEM_PAIR`: ``ssl.cert`` and ``ssl.key`` are given together.
* :data:`CREDENTIAL_PAIR`: MONGODB's ``userName`` and ``password`` are optional together.
* :data:`REQUIRED_METADATA`: ORACLE requires ``metadata.serviceName``.
* :data:`NETWORK_FIELDS`: SQLITE refuses the network fields (a local file has no server).
* :data:`SCHEMA_SUPPORT`: ``schema`` is accepted by POSTGRESQL, SQL_SERVER and ORACLE only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fetcher.services.api.shapes import (
    CONNECTION_FIELDS,
    NULLABLE_FIELDS,
    RESERVED_METADATA,
    RESERVED_VALUE,
    SCHEMA,
    TYPES,
    WS,
    Invalid,
    Schema,
    TypeRules,
    metadata_schema,
    nullable,
    rules_of,
    string,
)

__all__ = [
    "CREDENTIAL_PAIR",
    "PEM_PAIR",
    "REQUIRED_METADATA",
    "SCHEMA_SUPPORT",
    "NETWORK_FIELDS",
    "is_blank",
    "required_fields",
]


def is_blank(value: object) -> bool:
    """Absent for §2.5's required-field rule: ``None``, or a string of whitespace only."""
    return value is None or (isinstance(value, str) and not value.strip())


def _unsupported(name: str, kind: str | None) -> str:
    return f"{name} is not supported for type {kind}"


@dataclass(frozen=True, slots=True)
class _Pair:
    """Two fields given together or not at all."""

    names: tuple[str, str]

    def lone_absent(self, values: Mapping[str, object]) -> str | None:
        """The one that is absent (``None``) while the other is given, if any."""
        absent = [name for name in self.names if values.get(name) is None]
        return absent[0] if len(absent) == 1 else None


class PemPair:
    """§2.5: ``ssl.cert`` and ``ssl.key`` both or neither (``null`` or ``""`` is neither)."""

    pair = _Pair(("cert", "key"))
    message = "ssl.cert and ssl.key must be provided together"

    def check(self, texts: Mapping[str, str | None], errors: dict[str, str]) -> None:
        """``texts`` are the checked PEM texts; a lone one makes the other invalid (FET-0001),
        unless either already has its own error."""
        absent = self.pair.lone_absent(texts)
        if absent is not None and not any(f"ssl.{name}" in errors for name in self.pair.names):
            errors[f"ssl.{absent}"] = self.message

    def schema(self, pem: Schema, none: Schema) -> list[Schema]:
        """The ``anyOf`` of an ``ssl`` object: both ``none``, or both required and ``pem``."""
        first, second = self.pair.names
        return [
            {"properties": {first: none, second: none}},
            {"required": [first, second], "properties": {first: pem, second: pem}},
        ]


class CredentialPair:
    """§2.5 MONGODB (:attr:`TypeRules.optional_credentials`): without both ``userName`` and
    ``password`` the connection has no authentication; with exactly one, the other is missing
    (FET-0402), even when a PATCH cleared it with ``null``."""

    pair = _Pair(("userName", "password"))

    def optional(self, rules: TypeRules) -> bool:
        return rules.optional_credentials

    def missing(self, rules: TypeRules, values: Mapping[str, object]) -> list[str]:
        absent = self.pair.lone_absent(values) if self.optional(rules) else None
        return [] if absent is None else [absent]

    def none_given(self, rules: TypeRules, values: Mapping[str, object]) -> bool:
        return self.optional(rules) and all(values.get(name) is None for name in self.pair.names)

    def schema(self, rules: TypeRules) -> Schema:
        """The create branch's ``dependentRequired`` keyword (empty where both are required)."""
        if not self.optional(rules):
            return {}
        first, second = self.pair.names
        return {"dependentRequired": {first: [second], second: [first]}}


class RequiredMetadata:
    """§2.5 ORACLE (:attr:`TypeRules.required_metadata`): ``metadata.serviceName`` is required,
    non-blank (absent or blank → FET-0402 ``metadata.<key>``; another type is invalid)."""

    def missing(self, rules: TypeRules, metadata: object) -> list[str]:
        return [
            f"metadata.{key}"
            for key in rules.required_metadata
            if metadata is None or (isinstance(metadata, dict) and is_blank(metadata.get(key)))
        ]

    def schema(self, rules: TypeRules) -> tuple[Schema, list[str]]:
        """The create branch's ``metadata`` property (reserved values checked, the required
        keys required) and the top-level fields it makes required."""
        reserved = {key: nullable(RESERVED_VALUE.schema) for key in RESERVED_METADATA}
        reserved |= dict.fromkeys(rules.required_metadata, RESERVED_VALUE.schema)
        metadata = metadata_schema(reserved)
        if not rules.required_metadata:
            return nullable(metadata), []
        metadata["required"] = list(rules.required_metadata)
        return metadata, ["metadata"]

    def example(self) -> tuple[str, str]:
        """A type and the key it requires, for the PATCH description."""
        return next((kind, key) for kind, r in TYPES.items() for key in r.required_metadata)


class NetworkFields:
    """§2.5 SQLITE (:attr:`TypeRules.file`): a local file has no server, so the network fields
    are neither required nor accepted (each one *sent* is invalid), and a PATCH that changes
    the type to SQLITE clears them."""

    names = ("host", "port", "userName", "password")

    def refused(self, rules: TypeRules) -> bool:
        return rules.file

    def errors(
        self, kind: str | None, values: Mapping[str, object], sent: Callable[[str], bool]
    ) -> dict[str, str]:
        """FET-0001 ``fields`` for the network fields ``values`` holds that the body ``sent``."""
        return {
            name: _unsupported(name, kind) for name in self.names if name in values and sent(name)
        }

    def schema(self, rules: TypeRules, properties: Schema) -> Schema:
        """The create branch's ``properties`` without the network fields where refused."""
        if not self.refused(rules):
            return properties
        return {name: value for name, value in properties.items() if name not in self.names}


class SchemaSupport:
    """§2.5 ``schema`` (:attr:`TypeRules.schema`): accepted by POSTGRESQL, SQL_SERVER and
    ORACLE; a non-blank value for another type is invalid."""

    #: Another type's ``schema``: absent, ``null`` or blank.
    refused: Schema = nullable(string(f"^{WS}*$", description="Not supported for this type."))

    def check(self, kind: str | None) -> Callable[[object], str | None]:
        """The ``schema`` check for a connection of ``kind`` (``None``: the type is invalid)."""

        def rule(value: object) -> str | None:
            text = SCHEMA.check(value)
            if text is not None and kind is not None and not TYPES[kind].schema:
                raise Invalid(_unsupported("schema", kind))
            return text

        return rule

    def schema(self, rules: TypeRules) -> Schema:
        return SCHEMA.schema if rules.schema else self.refused

    def types(self) -> list[str]:
        return [kind for kind, rules in TYPES.items() if rules.schema]


PEM_PAIR = PemPair()
CREDENTIAL_PAIR = CredentialPair()
REQUIRED_METADATA = RequiredMetadata()
NETWORK_FIELDS = NetworkFields()
SCHEMA_SUPPORT = SchemaSupport()


def required_fields(kind: str | None) -> list[str]:
    """§2.5: the top-level fields ``kind`` requires (absent, null or blank → FET-0402), in
    table order; :data:`REQUIRED_METADATA` adds ``metadata.<key>``. An unknown type requires
    every field."""
    rules = rules_of(kind)
    left_out = {
        *NULLABLE_FIELDS,
        *(NETWORK_FIELDS.names if NETWORK_FIELDS.refused(rules) else ()),
        *(CREDENTIAL_PAIR.pair.names if CREDENTIAL_PAIR.optional(rules) else ()),
    }
    return [name for name in CONNECTION_FIELDS if name not in left_out]
