"""Value encoders of the result document (contract §5.3).

Connectors call these to turn driver values into JSON-ready values: ``None``, ``bool``, ``int``,
``float``, ``str``, lists and dicts of those, and :class:`ExactNumber` (a number inside a parsed
JSON column that must be written back with its source text, §5.3 "JSON/JSONB" row and §5.4
"JSON columns"). The serializer of §5.4 lives in :mod:`fetcher.engine.document`.

Logical document: ``json.loads`` of the serialized document equals the logical document in which
every :class:`ExactNumber` is replaced by its numeric value (``ExactNumber.value``).
``ExactNumber`` compares equal to that value, so ``json.loads(data) == logical`` holds directly.

Depth: a JSON column value or nested driver value deeper than
:data:`~fetcher.engine.errors.MAX_JSON_DEPTH` levels raises
:class:`~fetcher.engine.errors.JsonDepthError`, whatever the caller's stack depth: the parsers
measure a text the C scanner could not descend (:func:`_decode_deep`), the encoders count
levels, and a value within the bound that met a stack too deep for it is handled again on a
fresh one (:func:`on_fresh_stack`).
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final, TypeVar
from uuid import UUID

from fetcher.engine.errors import MAX_JSON_DEPTH, JsonDepthError

__all__ = [
    "ExactNumber",
    "encode_bytes",
    "encode_date",
    "encode_datetime",
    "encode_decimal",
    "encode_float",
    "encode_float32",
    "encode_interval",
    "encode_mysql_time",
    "encode_text",
    "encode_time",
    "encode_timedelta",
    "encode_uuid",
    "encode_value",
    "exceeds_json_depth",
    "json_text_exceeds_depth",
    "on_fresh_stack",
    "parse_json_exact",
    "parse_json_column",
    "parse_json_exact_fractions",
    "too_deep_member",
    "with_stack_retry",
]

_T = TypeVar("_T")

_JSON_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NON_FINITE: Final[dict[str, str]] = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
#: Longest integer text parsed to ``int``; longer ones stay text (CPython's 4300-digit limit).
_MAX_INT_DIGITS: Final = 4000
_FLOAT32_MAX: Final = (2 - 2**-23) * 2.0**127
#: Smallest magnitude that rounds to infinity as a float32 (the midpoint rounds to even: up).
_FLOAT32_OVERFLOW: Final = 2.0**128 - 2.0**103
_US_PER_SECOND: Final = 1_000_000
_US_PER_MINUTE: Final = 60 * _US_PER_SECOND
_US_PER_HOUR: Final = 60 * _US_PER_MINUTE
_US_PER_DAY: Final = 24 * _US_PER_HOUR
#: A JSON string (skipped whole, escapes included) or a bracket: what
#: :func:`json_text_exceeds_depth` counts nesting from.
_STRING_OR_BRACKET: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_OPENING: Final = frozenset("[{")
_CLOSING: Final = frozenset("]}")


@dataclass(frozen=True, slots=True, eq=False)
class ExactNumber:
    """A JSON number written back with exactly its source ``text`` (§5.3 JSON row, §5.4).

    ``text`` must be a valid JSON number (checked). It compares, and hashes, as its numeric value
    (``value``: what ``json.loads`` reads back), so a logical document holding it equals
    ``json.loads`` of the serialized document.
    """

    text: str

    def __post_init__(self) -> None:
        if _JSON_NUMBER.fullmatch(self.text) is None:
            raise ValueError(f"not a JSON number: {self.text[:40]!r}")

    @property
    def value(self) -> int | float:
        """The number ``json.loads`` reads from ``text``."""
        if "." in self.text or "e" in self.text or "E" in self.text:
            return float(self.text)
        return int(Decimal(self.text))  # not int(): beyond CPython's 4300-digit str limit

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ExactNumber):
            return self.value == other.value
        if isinstance(other, int | float) and not isinstance(other, bool):
            return self.value == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return self.text


def _exact_float(text: str) -> float | ExactNumber:
    """A JSON fraction/exponent number: a plain float when its repr is the text, else exact."""
    value = float(text)
    return value if repr(value) == text else ExactNumber(text)


def _exact_int(text: str) -> int | ExactNumber:
    """A JSON integer: ``int`` unless its text would not be reproduced (``-0``, huge)."""
    if text == "-0" or len(text) > _MAX_INT_DIGITS:
        return ExactNumber(text)
    return int(text)


def _non_finite_constant(text: str) -> str:
    """``NaN``/``Infinity``/``-Infinity`` (not JSON, but accepted by lenient sources) → strings,
    as the float row of §5.3 writes them."""
    return text


def parse_json_exact(text: str | bytes) -> object:
    """Parse a JSON column value (§5.3 JSON row) keeping every number's source text.

    Integers whose canonical text is their source stay ``int``; a fraction or exponent stays a
    ``float`` when ``repr`` gives back the same text, and becomes :class:`ExactNumber` otherwise
    (``1.10``, ``1E5``, ``-0``). Keys are sorted later by the serializer (§5.4).
    """
    # One decoder for every value: json.loads with hooks builds a new one per call, which
    # costs more than parsing a small document (a JSON column of 1 M rows).
    json_text = _json_text(text)
    try:
        return _EXACT_DECODER.decode(json_text)
    except RecursionError:
        return _decode_deep(_EXACT_DECODER, json_text)


def _json_text(text: str | bytes) -> str:
    """``text`` as ``json.loads`` reads it: bytes decoded as UTF-8/16/32 by detection."""
    if isinstance(text, bytes | bytearray):
        return bytes(text).decode(json.detect_encoding(text), "surrogatepass")
    return text


def _exact_fraction(text: str) -> ExactNumber:
    """A JSON fraction/exponent number as :class:`ExactNumber`, without the text check: the JSON
    scanner only hands over valid number text."""
    number = object.__new__(ExactNumber)
    object.__setattr__(number, "text", text)
    return number


def parse_json_exact_fractions(text: str | bytes) -> object:
    """:func:`parse_json_exact`, but every fraction or exponent number is an
    :class:`ExactNumber`, so the value holds no ``float`` at all.

    The logical value is the same (``ExactNumber`` compares as its number), and so are its
    §5.4 bytes. A value without floats can be written by a C encoder (orjson) that formats
    floats its own way: a connector marks such columns (``RowBatch.json_columns``).
    """
    json_text = _json_text(text)
    try:
        return _FRACTIONS_DECODER.decode(json_text)
    except RecursionError:
        return _decode_deep(_FRACTIONS_DECODER, json_text)


def json_text_exceeds_depth(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON ``text`` nests deeper than ``limit`` levels (brackets outside strings),
    found without recursion in one linear pass that stops at the first level past ``limit``.
    Text that is not JSON is measured the same way."""
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        piece = match.group()
        if piece in _OPENING:
            depth += 1
            if depth > limit:
                return True
        elif piece in _CLOSING:
            depth -= 1
    return False


def _decode_deep(decoder: json.JSONDecoder, text: str) -> object:
    """``decoder.decode(text)`` once the C scanner ran out of stack on it (it descends one
    recursion level per nesting level): :class:`JsonDepthError` when the text nests deeper than
    :data:`MAX_JSON_DEPTH`; otherwise the caller's own stack was too deep, and the text is
    parsed again on a fresh one."""
    if json_text_exceeds_depth(text):
        raise JsonDepthError
    return on_fresh_stack(decoder.decode, text)


def on_fresh_stack(function: Callable[..., _T], *args: Any) -> _T:
    """``function(*args)`` in a new thread, which starts with Python's whole recursion budget
    (it is counted per thread), and its result or exception here; the caller waits.

    For a value within :data:`MAX_JSON_DEPTH` that met a ``RecursionError`` only because its
    caller was already deep (the parsers and encoders need at most about two frames per
    level): so the outcome depends on the value alone, never on where it was met."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as exc:  # handed to the caller below
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name="fetcher-fresh-stack", daemon=True)
    thread.start()
    thread.join()
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    result: _T = value
    return result


def with_stack_retry(function: Callable[..., _T], *args: Any) -> _T:
    """``function(*args)``; after a ``RecursionError``, again on a fresh stack
    (:func:`on_fresh_stack`). For the recursive encoders of nested values, which refuse a value
    deeper than :data:`MAX_JSON_DEPTH` themselves."""
    try:
        return function(*args)
    except RecursionError:
        return on_fresh_stack(function, *args)


def exceeds_json_depth(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` (mappings, lists and tuples of anything) nests deeper than ``limit``
    levels; found without recursion, so it answers for a value of any depth."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        members: Iterable[object]
        if isinstance(item, Mapping):
            members = item.values()
        elif isinstance(item, list | tuple):
            members = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((member, depth + 1) for member in members)
    return False


def too_deep_member(rows: Iterable[Mapping[Any, object]]) -> str | None:
    """The first key, row by row in key order, whose value nests deeper than
    :data:`MAX_JSON_DEPTH` (:func:`exceeds_json_depth`), as text; ``None`` when none does.
    It names the column of a :class:`JsonDepthError` once a batch has been refused."""
    for row in rows:
        for key, value in row.items():
            if exceeds_json_depth(value):
                return key if isinstance(key, str) else str(key)
    return None


_NULL_FOR_NONE: Final[dict[object, str]] = {None: "null"}


def _column_decoder(
    *, canonical_ints: bool, parse_float: Callable[[str], object] = _exact_fraction
) -> json.JSONDecoder:
    """The decoder of :func:`parse_json_column`: integers by the C scanner itself when their
    text is canonical; fractions by ``parse_float`` (:class:`ExactNumber` by default)."""
    return json.JSONDecoder(
        parse_float=parse_float,
        parse_int=None if canonical_ints else _exact_int,
        parse_constant=_non_finite_constant,
    )


_COLUMN_DECODERS: Final = {ints: _column_decoder(canonical_ints=ints) for ints in (False, True)}
#: The decoders of :func:`parse_json_exact` and :func:`parse_json_exact_fractions`.
_EXACT_DECODER: Final = _column_decoder(canonical_ints=False, parse_float=_exact_float)
_FRACTIONS_DECODER: Final = _COLUMN_DECODERS[False]


def parse_json_column(
    texts: Sequence[str | None],
    *,
    canonical_ints: bool,
    parse_float: Callable[[str], object] | None = None,
) -> list[object]:
    """:func:`parse_json_exact_fractions` of each text (``None`` stays ``None``), in one call of
    the C scanner over the whole column: the texts are joined into one JSON array, so no Python
    code runs per value (but the hook of each fraction, unless ``parse_float`` is a C callable).

    Each text must be exactly one JSON value, as a database prints a JSON column. With
    ``canonical_ints`` (PostgreSQL ``jsonb``, whose numbers are ``numeric`` text: never ``-0``,
    never an exponent) integers are read by the scanner itself; an integer too long for ``int``
    then sends the column value by value through :func:`parse_json_exact_fractions`, as does
    any text that is not one value. ``parse_float`` replaces :class:`ExactNumber` for the
    fractions of the joined parse (a fast encoder's fragment of the source text, say): such
    values are only for a batch that knows how to encode and read them back
    (``fetcher.adapters.jsonlayout.fastjson``); the value-by-value fallback still gives
    ``ExactNumber``.

    A value nested deeper than :data:`MAX_JSON_DEPTH` may raise :class:`JsonDepthError` here
    (when the scanner cannot descend it) or be returned, to be refused by the encoder that
    meets it (the engine's writer, ``fetcher.adapters.jsonlayout.fastjson``); either way its job
    fails.
    """
    joined = "[" + ",".join(map(_NULL_FOR_NONE.get, texts, texts)) + "]"  # type: ignore[arg-type]
    decoder = (
        _COLUMN_DECODERS[canonical_ints]
        if parse_float is None
        else _column_decoder(canonical_ints=canonical_ints, parse_float=parse_float)
    )
    try:
        values = decoder.decode(joined)
    except (ValueError, RecursionError):  # a deep value: measured value by value below
        values = None
    if type(values) is list and len(values) == len(texts):
        return values
    return [None if text is None else parse_json_exact_fractions(text) for text in texts]


def encode_decimal(d: Decimal) -> str:
    """Exact decimal text, no exponent, scale kept (§5.3 decimal row): ``1.5E+3`` → ``1500``."""
    if d.is_nan():
        return "NaN"
    if d.is_infinite():
        return "-Infinity" if d.is_signed() else "Infinity"
    return format(d, "f")


def encode_float(x: float) -> float | str:
    """A double (§5.3 float row): finite → itself, NaN/±inf → ``"NaN"``/``"Infinity"``/…"""
    if math.isfinite(x):
        return float(x)
    return _NON_FINITE[repr(float(x))]


def _float32_bits(x: float) -> bytes | None:
    """The float32 nearest to ``x`` (IEEE round-to-nearest-even), as bytes; ``None`` when it
    overflows. ``struct`` refuses values just above the float32 maximum that round down to it."""
    try:
        return struct.pack("<f", x)
    except OverflowError:
        if abs(x) < _FLOAT32_OVERFLOW:
            return struct.pack("<f", math.copysign(_FLOAT32_MAX, x))
        return None


def encode_float32(x: float) -> float | str:
    """A 32-bit float (§5.3 float row): the float whose repr is the shortest text that
    round-trips as float32 (``0.1``, not ``0.10000000149011612``)."""
    if not math.isfinite(x):
        return encode_float(x)
    packed = _float32_bits(x)
    if packed is None:  # not a float32 value after all: keep it as a double
        return float(x)
    for digits in range(1, 10):
        candidate = float(f"{x:.{digits}g}")
        if _float32_bits(candidate) == packed:
            return candidate
    return float(x)  # unreachable: 9 significant digits always round-trip a float32


def encode_date(d: date) -> str:
    """``YYYY-MM-DD`` (§5.3 date row)."""
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def _fraction(microseconds: int) -> str:
    """``.ffffff`` with trailing zeros removed; empty when zero (§5.3)."""
    if microseconds == 0:
        return ""
    return "." + f"{microseconds:06d}".rstrip("0")


def encode_datetime(dt: datetime) -> str:
    """RFC 3339 in UTC with ``Z`` (§5.3 timestamp row). Naive values are taken as UTC.

    An aware value whose UTC form leaves years 1..9999 keeps its own ISO text (the Date row).
    """
    if dt.tzinfo is not None and dt.utcoffset() is not None:
        try:
            dt = dt.astimezone(UTC)
        except OverflowError:
            return dt.isoformat()
    return (
        f"{encode_date(dt)}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
        f"{_fraction(dt.microsecond)}Z"
    )


def _offset(offset: timedelta) -> str:
    """``±HH:MM`` (``±HH:MM:SS`` for a sub-minute offset)."""
    sign = "-" if offset < timedelta(0) else "+"
    seconds = abs(int(offset.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}"
    return f"{text}:{secs:02d}" if secs else text


def encode_time(t: time) -> str:
    """``HH:MM:SS[.ffffff]`` plus ``±HH:MM`` when the value carries a zone (§5.3 time row)."""
    text = f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}{_fraction(t.microsecond)}"
    offset = t.utcoffset()
    return text if offset is None else text + _offset(offset)


def encode_mysql_time(td: timedelta) -> str:
    """MySQL ``TIME`` (§5.3 time row): ``[-]HH:MM:SS[.ffffff]``, hours unbounded (≥ 2 digits)."""
    total = td // timedelta(microseconds=1)
    sign = "-" if total < 0 else ""
    hours, rest = divmod(abs(total), _US_PER_HOUR)
    minutes, rest = divmod(rest, _US_PER_MINUTE)
    seconds, micros = divmod(rest, _US_PER_SECOND)
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}{_fraction(micros)}"


def _signed_split(value: int, unit: int) -> tuple[int, int]:
    """``divmod`` of ``|value|`` with the sign of ``value`` applied to both parts."""
    whole, rest = divmod(abs(value), unit)
    return (-whole, -rest) if value < 0 else (whole, rest)


def _seconds_text(micros: int) -> str:
    """Seconds with an optional fraction (trailing zeros removed), sign kept."""
    sign = "-" if micros < 0 else ""
    whole, frac = divmod(abs(micros), _US_PER_SECOND)
    return f"{sign}{whole}{_fraction(frac)}"


def encode_interval(months: int, days: int, microseconds: int) -> str:
    """ISO 8601 duration (§5.3 interval row) omitting zero components; zero is ``PT0S``.

    Wholly negative → one leading ``-`` (``-P1D``); mixed signs → each component carries its own
    sign (``P1M-1D``). Years and months come from ``months``; hours, minutes and seconds from
    ``microseconds`` (all of the same sign as it).
    """
    years, month_rest = _signed_split(months, 12)
    hours, rest = _signed_split(microseconds, _US_PER_HOUR)
    minutes, micros = _signed_split(rest, _US_PER_MINUTE)
    parts = [years, month_rest, days, hours, minutes, micros]
    nonzero = [p for p in parts if p]
    if not nonzero:
        return "PT0S"
    negative = all(p < 0 for p in nonzero)
    if negative:
        years, month_rest, days, hours, minutes, micros = (-p for p in parts)
    date_part = "".join(f"{n}{u}" for n, u in ((years, "Y"), (month_rest, "M"), (days, "D")) if n)
    time_part = "".join(f"{n}{u}" for n, u in ((hours, "H"), (minutes, "M")) if n)
    if micros:
        time_part += _seconds_text(micros) + "S"
    text = "P" + date_part + ("T" + time_part if time_part else "")
    return "-" + text if negative else text


def encode_timedelta(td: timedelta) -> str:
    """A Python ``timedelta`` interval (§5.3 interval row) as whole days plus time, one sign."""
    total = td // timedelta(microseconds=1)
    days, micros = _signed_split(total, _US_PER_DAY)
    return encode_interval(0, days, micros)


def encode_bytes(b: bytes | bytearray | memoryview) -> str:
    """Standard base64 with padding (§5.3 bytes row)."""
    return base64.b64encode(bytes(b)).decode("ascii")


def encode_uuid(u: UUID) -> str:
    """Lower-case canonical ``8-4-4-4-12`` text (§5.3 UUID row)."""
    return str(u)


def encode_text(s: str) -> str:
    """Text (§5.3 text row) with unpaired surrogates replaced by U+FFFD.

    A surrogate pair held as two code points is joined into its astral character.
    """
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return s


def _encode_container(v: Mapping[object, object] | Sequence[object], depth: int) -> object:
    """A list, tuple or mapping at nesting level ``depth``: members encoded recursively, keys
    as text (§5.3 embedded document / array); deeper than :data:`MAX_JSON_DEPTH` refused."""
    if depth > MAX_JSON_DEPTH:
        raise JsonDepthError
    if isinstance(v, Mapping):
        return {
            encode_text(k if isinstance(k, str) else str(k)): _encode_member(member, depth)
            for k, member in v.items()
        }
    return [_encode_member(item, depth) for item in v]


def _encode_member(v: object, depth: int) -> object:
    """A member of a container at level ``depth`` (:func:`encode_value`, one level down)."""
    if isinstance(v, list | tuple | Mapping):
        return _encode_container(v, depth + 1)
    return encode_value(v)


_SCALAR_ENCODERS: Final[tuple[tuple[type | tuple[type, ...], Callable[[Any], object]], ...]] = (
    (bool, bool),
    (int, int),
    (float, encode_float),
    (Decimal, encode_decimal),
    (str, encode_text),
    ((bytes, bytearray, memoryview), encode_bytes),
    (datetime, encode_datetime),  # before date: a datetime is a date
    (date, encode_date),
    (time, encode_time),
    (timedelta, encode_timedelta),
    (UUID, encode_uuid),
)


def _scalar_encoder(v: object) -> Callable[[Any], object] | None:
    """The §5.3 encoder of a scalar driver value, or ``None`` when no row applies."""
    for kind, encoder in _SCALAR_ENCODERS:
        if isinstance(v, kind):
            return encoder
    return None


def encode_value(v: object) -> object:
    """The default §5.3 encoding of a common Python driver value.

    ``None``, ``bool``, ``int``, ``float``, ``Decimal``, ``str``, bytes-likes, ``date``,
    ``datetime``, ``time`` (zone kept), ``timedelta`` (as an interval), ``UUID``, lists/tuples
    and dicts (recursively, at most :data:`MAX_JSON_DEPTH` levels: :class:`JsonDepthError`) and
    :class:`ExactNumber`; anything else → ``str(v)`` (the "any other type" row). Connectors with
    engine-specific types (MySQL ``TIME``, float32 columns, JSON columns) call the specific
    encoder instead.
    """
    if v is None or isinstance(v, ExactNumber):
        return v
    encoder = _scalar_encoder(v)
    if encoder is not None:
        return encoder(v)
    if isinstance(v, list | tuple | Mapping):
        return _encode_container(v, 1)
    return encode_text(str(v))
