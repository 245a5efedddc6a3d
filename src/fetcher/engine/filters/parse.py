"""Manager-side parsing of ``dataRequest.filters`` into the filter AST (contract §3.4, §3.6 #12).

The input is the already JSON-decoded value. Parsing checks shape, operators, arity, value
shapes and value counts, then the datasource references; table and field references are the
Worker's business (§3.4 "Table and field references are checked in the Worker").

**Order of checks** (deterministic; the first failure wins). The structure is walked in request
order (datasource → table → field → operator, as the JSON object lists them):

1. ``filters`` itself is ``null``/``{}`` (→ no filters) or an object.
2. Each datasource value and each table value is an object.
3. Per field: the condition is an object holding at least one operator.
4. Per operator, in order: known operator name; the value is an array; every element is a
   scalar; arity; the 1,000-value cap (``eq``/``ne``/``in``/``nin``); no ``null`` where the
   operator forbids it; ``like`` holds a string of at most 256 characters.
5. After all fields of one table key: at most 2,000 values over that table key.
6. After the whole walk: every datasource key is present in ``mappedFields``; all unknown ones
   are reported together, sorted, joined with ``; `` (:class:`FilterReferenceError`).

Values are counted as given, ``null`` included. Booleans are scalars here; whether a boolean is
acceptable for a column is decided at binding time (``filters.bind``).

This module also holds the LIKE pattern tokenizer shared by the SQL and MongoDB renderers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import Condition, FieldFilter, FilterSpec, Operator, Scalar

__all__ = [
    "MAX_LIKE_PATTERN",
    "MAX_OPERATOR_VALUES",
    "MAX_TABLE_VALUES",
    "OPERATOR_ARITY",
    "FilterReferenceError",
    "LikeToken",
    "LikeTokenKind",
    "OperatorArity",
    "check_table_value_count",
    "count_filter_values",
    "like_tokens",
    "parse_filters",
]

#: §3.4 "Value counts": values per ``eq``/``ne``/``in``/``nin`` operator.
MAX_OPERATOR_VALUES = 1000
#: §3.4 "Value counts": values over all fields and operators of one table key.
MAX_TABLE_VALUES = 2000
#: §3.4 "Value counts": characters of a ``like`` pattern.
MAX_LIKE_PATTERN = 256


@dataclass(frozen=True, slots=True)
class OperatorArity:
    """§3.4: how many values an operator takes, whether ``null`` is one of them, and whether
    its one value is a LIKE pattern (a string of at most :data:`MAX_LIKE_PATTERN` characters)."""

    min: int
    max: int
    nullable: bool = False
    pattern: bool = False


_LIST = OperatorArity(1, MAX_OPERATOR_VALUES, nullable=True)
_ONE = OperatorArity(1, 1)
#: §3.4 operators and their arity (the Manager's JSON Schema is generated from it).
OPERATOR_ARITY: Mapping[Operator, OperatorArity] = MappingProxyType(
    {
        Operator.EQ: _LIST,
        Operator.NE: _LIST,
        Operator.IN: _LIST,
        Operator.NIN: _LIST,
        Operator.GT: _ONE,
        Operator.GTE: _ONE,
        Operator.LT: _ONE,
        Operator.LTE: _ONE,
        Operator.BETWEEN: OperatorArity(2, 2),
        Operator.LIKE: OperatorArity(1, 1, pattern=True),
    }
)
_EMPTY_SPEC: FilterSpec = MappingProxyType({})


class FilterReferenceError(EngineError):
    """A filter names a datasource absent from ``mappedFields`` (§3.4).

    The Manager answers it with FET-0401 and the title ``Invalid Filter References``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCategory.VALIDATION, message)


def _fail(message: str) -> EngineError:
    return EngineError(ErrorCategory.VALIDATION, message)


def parse_filters(
    raw: object, mapped_fields: Mapping[str, Mapping[str, Sequence[str]]]
) -> FilterSpec:
    """Parse ``dataRequest.filters`` (§3.4) into ``{ds: {table key: (FieldFilter, …)}}``.

    ``None`` and ``{}`` give an empty spec. Tables without field conditions and datasources
    without tables are left out of the result (their datasource keys are still checked).
    Raises ``EngineError(VALIDATION)``, or :class:`FilterReferenceError` for unknown
    datasources, in the order documented in the module docstring.
    """
    if raw is None:
        return _EMPTY_SPEC
    if not isinstance(raw, dict):
        raise _fail("filters must be an object")
    spec: dict[str, Mapping[str, tuple[FieldFilter, ...]]] = {}
    for ds, tables in raw.items():
        parsed = _parse_datasource(str(ds), tables)
        if parsed:
            spec[str(ds)] = MappingProxyType(parsed)
    unknown = sorted(str(ds) for ds in raw if ds not in mapped_fields)
    if unknown:
        raise FilterReferenceError(
            "; ".join(
                f"filter references unknown datasource '{ds}' not found in mappedFields"
                for ds in unknown
            )
        )
    return MappingProxyType(spec)


def _parse_datasource(ds: str, tables: object) -> dict[str, tuple[FieldFilter, ...]]:
    if not isinstance(tables, dict):
        raise _fail(f"filters for datasource '{ds}' must be an object")
    parsed: dict[str, tuple[FieldFilter, ...]] = {}
    for table, fields in tables.items():
        if not isinstance(fields, dict):
            raise _fail(f"filters for table '{table}' in datasource '{ds}' must be an object")
        field_filters = tuple(_parse_field(str(f), cond) for f, cond in fields.items())
        check_table_value_count(ds, str(table), field_filters)
        if field_filters:
            parsed[str(table)] = field_filters
    return parsed


def _parse_field(field: str, raw: object) -> FieldFilter:
    if not isinstance(raw, dict):
        raise _fail(f"filter for field '{field}' must be an object of operators")
    if not raw:
        raise _fail(f"filter for field '{field}' must have at least one operator")
    conditions = tuple(_parse_condition(field, str(op), values) for op, values in raw.items())
    return FieldFilter(field=field, conditions=conditions)


def _parse_condition(field: str, name: str, raw: object) -> Condition:
    try:
        op = Operator(name)
    except ValueError:
        raise _fail(f"unknown filter operator '{name}' for field '{field}'") from None
    if not isinstance(raw, list):
        raise _fail(f"{op} operator for field '{field}' must have an array of values")
    values = tuple(_scalar(field, op, element) for element in raw)
    arity = OPERATOR_ARITY[op]
    _check_arity(field, op, arity, len(values))
    if not arity.nullable and any(v is None for v in values):
        raise _fail(f"{op} operator for field '{field}' does not allow null values")
    if arity.pattern:
        pattern = values[0]
        if not isinstance(pattern, str):
            raise _fail(f"like operator for field '{field}' must have a string pattern")
        if len(pattern) > MAX_LIKE_PATTERN:
            raise _fail(
                f"like operator for field '{field}' must have a pattern of at most "
                f"{MAX_LIKE_PATTERN} characters"
            )
    return Condition(op=op, values=values)


def _scalar(field: str, op: Operator, element: object) -> Scalar:
    if element is None or isinstance(element, str | int | float):
        return element
    raise _fail(
        f"{op} operator for field '{field}' must have only scalar values "
        "(string, number, boolean or null)"
    )


def _values(n: int) -> str:
    return f"{n} value" if n == 1 else f"{n} values"


def _check_arity(field: str, op: Operator, arity: OperatorArity, n: int) -> None:
    if arity.min == arity.max and n != arity.min:
        raise _fail(
            f"{op} operator for field '{field}' must have exactly {_values(arity.min)}, got {n}"
        )
    if n < arity.min:
        raise _fail(
            f"{op} operator for field '{field}' must have at least {_values(arity.min)}, got {n}"
        )
    if n > arity.max:
        raise _fail(
            f"{op} operator for field '{field}' must have at most {_values(arity.max)}, got {n}"
        )


def count_filter_values(field_filters: Iterable[FieldFilter]) -> int:
    """The number of values of one table key over all fields and operators (nulls count)."""
    return sum(len(c.values) for ff in field_filters for c in ff.conditions)


def check_table_value_count(ds: str, table: str, field_filters: Sequence[FieldFilter]) -> None:
    """§3.4: at most 2,000 values per table key; the Worker re-checks after the §3.3 merge."""
    if count_filter_values(field_filters) > MAX_TABLE_VALUES:
        raise _fail(f"too many filter values for '{ds}.{table}'")


class LikeTokenKind(Enum):
    """The three kinds of token of a §3.4 LIKE pattern."""

    ANY_RUN = "%"
    ANY_ONE = "_"
    LITERAL = "literal"


@dataclass(frozen=True, slots=True)
class LikeToken:
    kind: LikeTokenKind
    char: str = ""


def like_tokens(pattern: str) -> tuple[LikeToken, ...]:
    """Split a LIKE pattern (§3.4 "LIKE") into wildcards and literal characters.

    ``%`` is any run and ``_`` any one character. ``\\`` makes the next character literal
    (``\\%``, ``\\_``, ``\\\\``; before any other character it is simply dropped, as engines do
    under ``ESCAPE '\\'``). A trailing lone ``\\`` is a literal backslash. Renderers re-emit
    the tokens in their own escaping, so every engine sees the same pattern.
    """
    tokens: list[LikeToken] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            tokens.append(LikeToken(LikeTokenKind.LITERAL, pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            tokens.append(LikeToken(LikeTokenKind.ANY_RUN))
        elif ch == "_":
            tokens.append(LikeToken(LikeTokenKind.ANY_ONE))
        else:
            tokens.append(LikeToken(LikeTokenKind.LITERAL, ch))
        i += 1
    return tuple(tokens)
