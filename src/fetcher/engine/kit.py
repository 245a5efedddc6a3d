"""What Fetcher's own hosts use of the engine beyond its §1.4 API.

Contract §1.4 fixes ``fetcher.engine.__all__`` and calls everything else private. The adapters
(connectors, object stores) and the services still need a few of the engine's building blocks:
the §5.3 value encoders, the §3.4 filter renderers, the §3.3 table-name rules and the schema
types. They import them from here, and only from here (``tests/architecture`` checks it), so the
engine's submodules stay private and this list is the one place that says what crosses the ring.
It is not a public API: it may change with the engine.
"""

from fetcher.engine.document import ROW_DEPTH, RowBatch
from fetcher.engine.errors import MAX_JSON_DEPTH, JsonDepthError, naming_column, query_error
from fetcher.engine.filters.ast import BoundFieldFilter, FilterSpec
from fetcher.engine.filters.mongo import check_mongo_field, render_mongo_filter
from fetcher.engine.filters.parse import (
    MAX_LIKE_PATTERN,
    MAX_OPERATOR_VALUES,
    MAX_TABLE_VALUES,
    OPERATOR_ARITY,
    FilterReferenceError,
    OperatorArity,
    parse_filters,
)
from fetcher.engine.filters.sql import dialect_for, quote_identifier, render_select
from fetcher.engine.limits import LIMIT_NAMES
from fetcher.engine.mapped_fields import (
    JOB_COUNTS,
    VALIDATION_COUNTS,
    MappedFieldsChecks,
    first_mapped_fields_problem,
)
from fetcher.engine.model import TlsSettings
from fetcher.engine.names import (
    DEFAULT_SCHEMA_MARKER,
    RequestedTable,
    discovery_scope,
    fields_case_insensitive,
    find_table,
    normalize_field,
    parse_table_key,
    static_default_schema,
)
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.spans import DB_SYSTEM, SpanHandle, SpanOpener, set_span_opener
from fetcher.engine.types import Column, DiscoveredSchema, EngineType, TableSchema, TypeFamily
from fetcher.engine.values import (
    ExactNumber,
    encode_bytes,
    encode_date,
    encode_datetime,
    encode_decimal,
    encode_float,
    encode_float32,
    encode_interval,
    encode_text,
    encode_time,
    encode_timedelta,
    encode_uuid,
    encode_value,
    on_fresh_stack,
    parse_json_column,
    parse_json_exact_fractions,
    too_deep_member,
    with_stack_retry,
)

__all__ = [
    "DB_SYSTEM",
    "SpanHandle",
    "SpanOpener",
    "set_span_opener",
    # what crosses the ports
    "Row",
    "ROW_DEPTH",
    "RowBatch",
    "TableQuery",
    "TlsSettings",
    # schemas and table names (§3.3, §11)
    "Column",
    "DiscoveredSchema",
    "EngineType",
    "TableSchema",
    "TypeFamily",
    "DEFAULT_SCHEMA_MARKER",
    "RequestedTable",
    "discovery_scope",
    "fields_case_insensitive",
    "find_table",
    "normalize_field",
    "parse_table_key",
    "static_default_schema",
    # the mappedFields walker and the count rules (§2.6.9, §3.2, §3.5)
    "JOB_COUNTS",
    "VALIDATION_COUNTS",
    "MappedFieldsChecks",
    "first_mapped_fields_problem",
    # limits and filters (§3.4, §3.5)
    "LIMIT_NAMES",
    "BoundFieldFilter",
    "FilterSpec",
    "FilterReferenceError",
    "MAX_LIKE_PATTERN",
    "MAX_OPERATOR_VALUES",
    "MAX_TABLE_VALUES",
    "OPERATOR_ARITY",
    "OperatorArity",
    "parse_filters",
    "dialect_for",
    "quote_identifier",
    "render_select",
    "check_mongo_field",
    "render_mongo_filter",
    # §5.3 value encodings
    "ExactNumber",
    "encode_bytes",
    "encode_date",
    "encode_datetime",
    "encode_decimal",
    "encode_float",
    "encode_float32",
    "encode_interval",
    "encode_text",
    "encode_time",
    "encode_timedelta",
    "encode_uuid",
    "encode_value",
    "parse_json_column",
    "parse_json_exact_fractions",
    # nesting depth (§5.3 nested values; see MAX_JSON_DEPTH) and the §4.5 query failure
    "MAX_JSON_DEPTH",
    "JsonDepthError",
    "naming_column",
    "on_fresh_stack",
    "query_error",
    "too_deep_member",
    "with_stack_retry",
]
