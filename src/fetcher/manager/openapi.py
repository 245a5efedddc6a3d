"""Precise JSON Schemas for ``/openapi.json``: request bodies, path IDs, query parameters and
the ``X-Product-Name`` header (contract §2.1, §2.4, §2.5, §2.6, §2.12, §3.1-§3.5).

The routes parse their inputs themselves (§2.1 is stricter than any model). Each field's schema
is declared in :mod:`fetcher.services.api.shapes` next to the check it describes, and each
cross-field connection rule's fragment in :mod:`fetcher.services.connections.rules` with its
check; this module assembles them into bodies and parameters, so that a schema-valid request
passes every rule a JSON Schema can express, and a schema-invalid request is rejected:

* strings that the validators trim admit surrounding whitespace (``WS`` is exactly the set
  ``str.strip()`` removes), and every string excludes U+0000 (a §2.1 hostile value);
* fixed-schema objects have ``additionalProperties: false``; free-form maps (``metadata``)
  restrict their values to flat scalars; numbers stay within 19 integer digits (§2.1);
* connection bodies are one branch per ``type``, so ``schema``, TLS vocabularies (§11.2), the
  Oracle ``serviceName`` and the SQLITE field rules hold per type; ``SQLITE`` is offered only
  where the deployment accepts it (embedded mode with ``SQLITE_ALLOWED_DIR``, §2.5.1);
* empty query values of the list routes are allowed, as §2.6.2 treats them as absent.

What no JSON Schema can say is stated in the descriptions: whether a named datasource exists
(§3.6 step 14, §2.6.9), cross-field and cross-parameter rules (PATCH merges with the stored
record, ``page × limit`` ≤ 2^31, ``endDate`` ≥ ``startDate``, limit overrides lowering counts),
the SQLITE file checks, and the SSRF guard.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from fetcher.engine import Limits
from fetcher.engine.kit import (
    LIMIT_NAMES,
    MAX_LIKE_PATTERN,
    MAX_TABLE_VALUES,
    OPERATOR_ARITY,
    OperatorArity,
)
from fetcher.services.api import shapes
from fetcher.services.api.response_models import ErrorBody
from fetcher.services.api.shapes import NO_NUL, NULL, Schema, nullable, string, trimmed
from fetcher.services.connections.rules import (
    CREDENTIAL_PAIR,
    NETWORK_FIELDS,
    PEM_PAIR,
    REQUIRED_METADATA,
    SCHEMA_SUPPORT,
    required_fields,
)
from fetcher.services.errors import EMPTY_BODY_MESSAGE

_EMPTY_OBJECT: Schema = {"type": "object", "maxProperties": 0}


# --- route fragments: error answers, JSON bodies, parameters ------------------------------

_ERROR_TEXT = {
    400: "Validation error (FET-0001, FET-04xx, FET-10xx)",
    404: "Not found (FET-1001 entity, FET-0005 route)",
    405: "Method not allowed (FET-0008), with an Allow header",
    409: "Conflict (FET-0004, FET-1002, FET-1015, FET-1021, FET-1104, FET-1105)",
    410: "Result expired (FET-1101)",
    413: "Payload too large (FET-0007)",
    415: "Unsupported media type (FET-0009)",
    421: "The Host header names a host this service does not answer for (FET-0013, ALLOWED_HOSTS)",
    416: "Range not satisfiable (FET-1102), with Content-Range: bytes */<size>",
    422: "Schema validation failed (FET-1060)",
    429: "Too many requests (FET-0006), with a Retry-After header",
    500: "Internal server error (FET-0002)",
    502: "Datasource error (FET-1041, FET-1042)",
    503: "Service unavailable (FET-0003)",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries with the §2.2 body for ``statuses`` plus 500 and 503."""
    codes = sorted({*statuses, 500, 503})
    return {s: {"model": ErrorBody, "description": _ERROR_TEXT[s]} for s in codes}


#: Issue 33: with ``AUTH_MODE=none``, a state-changing request sent from another site.
CROSS_SITE_RESPONSE = {
    "description": "Sent from another site while AUTH_MODE is none (FET-0014)",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
}


def declare_host_check(schema: dict[str, Any]) -> None:
    """Add the ``421 FET-0013`` answer to every operation: every route checks ``Host``."""
    answer = {
        "description": _ERROR_TEXT[421],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            operation.setdefault("responses", {}).setdefault("421", answer)


def declare_cross_site(schema: dict[str, Any]) -> None:
    """Add the ``403 FET-0014`` answer to every ``POST``/``PUT``/``PATCH``/``DELETE``."""
    for operations in schema.get("paths", {}).values():
        for method, operation in operations.items():
            if method in ("post", "put", "patch", "delete"):
                operation.setdefault("responses", {}).setdefault("403", CROSS_SITE_RESPONSE)


def json_request_body(component: str, *, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` for a JSON body parsed by the route itself (§2.1); ``component`` is a
    ``components.schemas`` entry of :func:`request_components`."""
    content = {"application/json": {"schema": {"$ref": f"#/components/schemas/{component}"}}}
    return {"requestBody": {"required": required, "content": content}}


def parameter(
    name: str,
    where: Literal["path", "query", "header"],
    description: str,
    *,
    required: bool = False,
    schema: Schema | None = None,
) -> Schema:
    """One OpenAPI parameter object (routes read their parameters themselves)."""
    return {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "description": description,
        "schema": schema or {"type": "string"},
    }


# --- header and path parameters (§2.1, §2.4) ----------------------------------------------


def product_header_parameter(*, required: bool) -> Schema:
    """``X-Product-Name`` (§2.4): required on create and assign, a filter on list."""
    description = (
        f"The owning product: trimmed, then lower-cased; 1-{shapes.MAX_PRODUCT} characters of "
        "letters, digits, `_` and `-`. Violations → 400 FET-0403."
    )
    if not required:
        description += " Optional: when present it filters the list by product."
    schema = shapes.PRODUCT_HEADER.schema  # the check's own schema (§2.4)
    return parameter("X-Product-Name", "header", description, required=required, schema=schema)


def _path_id(what: str) -> Schema:
    description = (
        f"{what.capitalize()} ID: a canonical hyphenated UUID in any letter case. "
        f"Anything else → 400 FET-0404 `invalid {what} id`."
    )
    return parameter("id", "path", description, schema=string(f"^{shapes.UUID_PATTERN}$"))


CONNECTION_ID = _path_id("connection")
JOB_ID = _path_id("job")


def _query(name: str, description: str, schema: Schema) -> Schema:
    return parameter(name, "query", description, schema=schema)


# --- list and feed query parameters (§2.6.2, §2.12), declared in shapes --------------------


def list_parameters(max_limit: int) -> list[Schema]:
    """§2.6.2 query parameters; an empty value is treated as absent."""
    return [_query(p.name, p.description, p.schema) for p in shapes.list_params(max_limit)]


LIST_DESCRIPTION = (
    "Unknown query parameters are ignored and empty values are treated as absent. "
    f"`{shapes.METADATA_FILTER_PREFIX}<key>=<value>` parameters (several are ANDed) match "
    "connections whose `metadata[key]` is that string, or a number or boolean with that JSON "
    f"text; a key over {shapes.MAX_METADATA_KEY} or a value over "
    f"{shapes.MAX_METADATA_FILTER_VALUE} characters → 400 FET-0405."
)


def feed_parameters() -> list[Schema]:
    """§2.12 event-feed parameters (empty values are malformed here)."""
    return [_query(p.name, p.description, p.schema) for p in shapes.FEED_PARAMS]


def schemas_parameter() -> Schema:
    return _query(
        "schemas",
        f"Comma-separated list of 1-{shapes.MAX_SCHEMAS_PARAM} non-blank schema names (ignored "
        "for MySQL, MongoDB and SQLite). Default: the connection's `schema`, else the engine "
        "default. Else FET-0405.",
        shapes.SCHEMAS_PARAM.schema,
    )


# --- connection bodies (§2.5): one branch per type, from shapes.TYPES ----------------------

_PEM = shapes.pem("ca").schema
_NO_PEM: Schema = {"enum": [None, ""]}
_PEM_OR_NONE: Schema = {"anyOf": [_NO_PEM, _PEM]}


def _ssl(modes: Sequence[str], *, pem: bool = True) -> Schema:
    """``ssl``: ``null``/``{}`` for none, else ``mode`` (the §11.2 vocabulary ``modes``, or
    ``""``) with optional PEM ``ca`` and ``cert``/``key`` given together; no PEM without TLS."""
    vocabulary = "|".join(re.escape(m) for m in modes)
    mode = string(trimmed(f"(?:{vocabulary})?" if vocabulary else ""))
    texts = dict.fromkeys(("ca", "cert", "key"), _PEM_OR_NONE if pem else _NO_PEM)
    settings: Schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["mode"],
        "properties": {"mode": mode, **texts},
    }
    if pem:
        settings["anyOf"] = PEM_PAIR.schema(_PEM, _NO_PEM)
    return {"anyOf": [NULL, _EMPTY_OBJECT, settings]}


def _create_branch(kind: str) -> Schema:
    """One ``type``'s create body (§2.5): its :class:`~fetcher.services.api.shapes.TypeRules` row
    through the rule objects of :mod:`fetcher.services.connections.rules`."""
    rules = shapes.TYPES[kind]
    metadata, metadata_required = REQUIRED_METADATA.schema(rules)
    properties: Schema = {  # in the order Swagger UI shows them (the published one)
        "configName": shapes.CONFIG_NAME.schema,
        "type": string(trimmed(re.escape(kind)), description=f"`{kind}`"),
        "host": shapes.HOST.schema,
        "port": shapes.PORT.schema,
        "databaseName": shapes.SQLITE_PATH_SCHEMA if rules.file else shapes.DATABASE_NAME.schema,
        "userName": shapes.USER_NAME.schema,
        "password": shapes.PASSWORD.schema,
        "ssl": _ssl(rules.ssl_modes, pem=not rules.file),
        "schema": SCHEMA_SUPPORT.schema(rules),
        "metadata": metadata,
    }
    return {
        "title": f"{kind} connection",
        "type": "object",
        "additionalProperties": False,
        "required": required_fields(kind) + metadata_required,
        "properties": NETWORK_FIELDS.schema(rules, properties),
        **CREDENTIAL_PAIR.schema(rules),
    }


def connection_create_schema(types: Sequence[str]) -> Schema:
    """§2.5 create body, one branch per accepted ``type``."""
    return {
        "title": "ConnectionCreate",
        "description": (
            "§2.5 input. Strings are trimmed except `password` and the PEM texts. Unknown "
            "fields → FET-0400; missing → FET-0402; invalid → FET-0001 (FET-0410-0413 for "
            "metadata and TLS rules); a blocked host under the SSRF guard → FET-0414; a taken "
            "configName → 409 FET-1002."
        ),
        "type": "object",
        "anyOf": [_create_branch(kind) for kind in types],
    }


def _listed(names: Sequence[str]) -> str:
    """``a, b and c``."""
    return f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else "".join(names)


def connection_update_schema(types: Sequence[str]) -> Schema:
    """§2.6.5 PATCH body: any non-empty subset of the fields. The merged record must pass the
    create rules of its (possibly new) type, which this schema cannot see."""
    rules = [shapes.TYPES[kind] for kind in types]
    all_modes = sorted({mode for rule in rules for mode in rule.ssl_modes})
    database = shapes.DATABASE_NAME.schema
    if any(rule.file for rule in rules):  # the SQLITE path has no character rule
        database = shapes.DATABASE_PATH.schema
    properties: Schema = {
        "configName": shapes.CONFIG_NAME.schema,
        "type": string(trimmed("(?:" + "|".join(re.escape(t) for t in types) + ")")),
        "host": shapes.HOST.schema,
        "port": shapes.PORT.schema,
        "databaseName": database,
        "schema": shapes.SCHEMA.schema,
        # null (both together) only for MONGODB (§2.5)
        "userName": nullable(shapes.USER_NAME.schema),
        "password": nullable(shapes.PASSWORD.schema),
        "ssl": _ssl(all_modes),
        "metadata": nullable(
            shapes.metadata_schema(
                {key: nullable(shapes.RESERVED_VALUE.schema) for key in shapes.RESERVED_METADATA}
            )
        ),
    }
    cleared = [f"`{name}`" for name in shapes.CONNECTION_FIELDS if name in shapes.NULLABLE_FIELDS]
    kind, key = REQUIRED_METADATA.example()
    with_schema = SCHEMA_SUPPORT.types()
    return {
        "title": "ConnectionUpdate",
        "description": (
            "§2.6.5 merge semantics: an absent field is unchanged; `null` clears "
            f"{_listed(cleared)} (and is invalid elsewhere); `ssl` and `metadata` replace the "
            f"stored value. `{{}}` → 400 FET-0001 `{EMPTY_BODY_MESSAGE}`. The merged record is "
            f"then validated with the create rules of its type (e.g. {kind} needs "
            f"`metadata.{key}`, `schema` only for {_listed(with_schema)})."
        ),
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "properties": properties,
    }


# --- job and validate-schema bodies (§2.6.9, §3.1-§3.5) -----------------------------------


def validate_schema_request_schema() -> Schema:
    """§2.6.9 body (before resolution: FET-1062 when no datasource resolves)."""
    return {
        "title": "ValidateSchemaRequest",
        "description": (
            "`{mappedFields: {configName: {table: [field, …]}}}`: at most "
            f"{shapes.MAX_VALIDATION_DATASOURCES} datasources, {shapes.MAX_VALIDATION_TABLES} "
            f"tables each and {shapes.MAX_VALIDATION_FIELDS} fields per table (FET-1061); names "
            "non-blank and unpadded; `*` only alone. When none of the datasources resolve → 400 "
            "FET-1062."
        ),
        "type": "object",
        "additionalProperties": False,
        "required": ["mappedFields"],
        "properties": {
            "mappedFields": shapes.mapped_fields_schema(
                shapes.MAX_VALIDATION_DATASOURCES,
                shapes.MAX_VALIDATION_TABLES,
                shapes.MAX_VALIDATION_FIELDS,
                job=False,
            )
        },
    }


_NON_NULL_SCALAR: Schema = {**shapes.SCALAR, "type": ["string", "number", "boolean"]}


def _operators() -> Schema:
    """§3.4 operators and arity, from the engine's table."""
    like: Schema = {"type": "string", "maxLength": MAX_LIKE_PATTERN, "pattern": NO_NUL}

    def values(arity: OperatorArity) -> Schema:
        items = like if arity.pattern else shapes.SCALAR if arity.nullable else _NON_NULL_SCALAR
        return {"type": "array", "minItems": arity.min, "maxItems": arity.max, "items": items}

    return {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "properties": {op.value: values(arity) for op, arity in OPERATOR_ARITY.items()},
    }


def job_request_schema(max_limits: Limits) -> Schema:
    """§3.1 body; the §3.6 steps a schema cannot express are in the description."""
    limit_values = {name: getattr(max_limits, attr) for name, attr in LIMIT_NAMES.items()}
    filters = {
        "type": "object",
        "additionalProperties": {
            "type": "object",
            "additionalProperties": {"type": "object", "additionalProperties": _operators()},
        },
    }
    data_request = {
        "type": "object",
        "additionalProperties": False,
        "required": ["mappedFields"],
        "properties": {
            "mappedFields": shapes.mapped_fields_schema(
                max_limits.max_datasources,
                max_limits.max_tables_per_datasource,
                max_limits.max_fields_per_table,
                job=True,
            ),
            "filters": nullable(filters),
            "limits": nullable(
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        name: {"type": "integer", "minimum": 1, "maximum": value}
                        for name, value in limit_values.items()
                    },
                }
            ),
        },
    }
    return {
        "title": "JobRequest",
        "description": (
            "§3.1 body, validated in the order of §3.6. Not expressible here: every datasource "
            "must resolve to a connection owned by the normalized `metadata.source` (FET-1020, "
            "FET-1014, FET-1016) and pass a live test (FET-1040, FET-0414); limit overrides "
            "lower the counts; filter datasources must appear in `mappedFields`; at most "
            f"{MAX_TABLE_VALUES} filter values per table."
        ),
        "type": "object",
        "additionalProperties": False,
        "required": ["dataRequest", "metadata"],
        "properties": {
            "dataRequest": data_request,
            "metadata": shapes.metadata_schema({"source": shapes.SOURCE.schema}, ["source"]),
        },
    }


def request_components(*, sqlite: bool, max_limits: Limits) -> dict[str, Schema]:
    """``components.schemas`` entries for the request bodies of this deployment."""
    types = [kind for kind, rules in shapes.TYPES.items() if sqlite or not rules.file]
    return {
        "ConnectionCreate": connection_create_schema(types),
        "ConnectionUpdate": connection_update_schema(types),
        "ValidateSchemaRequest": validate_schema_request_schema(),
        "JobRequest": job_request_schema(max_limits),
    }


# --- authentication (§12.1-§12.3) ----------------------------------------------------------

#: The ``components.securitySchemes`` name of the bearer token.
BEARER_SCHEME = "bearerAuth"
_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


def declare_security(schema: Schema, scopes: dict[tuple[str, str], str]) -> None:
    """With ``AUTH_MODE=jwt``: the HTTP bearer (JWT) scheme, and on every guarded operation
    (``scopes`` maps ``(method, path)`` to its §12.3 scope) its ``security`` requirement, the
    scope named as an OpenAPI 3.1 role, and the 401/403 answers. Operational routes stay open.
    """
    schema.setdefault("components", {})["securitySchemes"] = {
        BEARER_SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": (
                "A JWT from the configured issuer (§12.2). Scopes come from `scope` "
                "(space-separated) and `scp`; `fetcher:admin` grants every route."
            ),
        }
    }
    for (method, path), scope in scopes.items():
        operation = schema["paths"][path][method]
        operation["security"] = [{BEARER_SCHEME: [scope]}]
        responses = operation.setdefault("responses", {})
        responses["401"] = {
            "description": "Missing or invalid bearer token (FET-0010), with WWW-Authenticate",
            "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
            "content": {"application/json": {"schema": _ERROR_REF}},
        }
        responses["403"] = {
            "description": (
                f"The token lacks scope {scope} (FET-0011), or a product-restricted token "
                "acts for another product (FET-0012)"
            ),
            "content": {"application/json": {"schema": _ERROR_REF}},
        }
        operation["responses"] = dict(sorted(responses.items()))
