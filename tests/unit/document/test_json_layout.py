"""JSON texts laid out in C (``fetcher.adapters.jsonlayout.texts``, issue 23): for every text the
extension accepts, its bytes equal what the project's Python path writes for the value that
text parses to exactly (``parse_json_exact_fractions``, numbers keeping their source text)
through the engine's reference writer (``dumps_document``, the §5.4 escaping written from the
rule); everything else declines (``None``), and hostile input never crashes, hangs or reads
past a text's end."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fetcher.adapters.jsonlayout import texts as json_layout
from fetcher.adapters.jsonlayout.fastjson import FastRowBatch, parse_json_column
from fetcher.adapters.jsonlayout.texts import layout_rows, layout_value
from fetcher.engine.document import (
    ROW_DEPTH,
    _encode_into,
    _rows_bytes,
    _spec_escape,
    _to_utf8,
    dumps_document,
    encode_row,
)
from fetcher.engine.errors import MAX_JSON_DEPTH
from fetcher.engine.ports import Row
from fetcher.engine.values import parse_json_exact_fractions, with_stack_retry
from tests.services import services_required
from tests.unit.leaks import assert_no_leaks

_NOT_BUILT = (
    "the C extension fetcher.adapters.jsonlayout._native is not built, so layout_rows declines "
    "everything (build it: pip install -e . or python setup.py build_ext --inplace)"
)
native = pytest.mark.skipif(not json_layout.NATIVE, reason=_NOT_BUILT)


def test_the_native_module_is_built() -> None:
    """Fails in CI (``FETCHER_REQUIRE_SERVICES=1``) when the extension is missing: there a
    silently absent module would leave the fast path declining everything while every other
    test here skips."""
    try:
        from fetcher.adapters.jsonlayout import _native as _json_layout
    except ImportError as exc:
        message = f"{_NOT_BUILT}: {exc}"
        if services_required():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    assert json_layout.NATIVE
    assert _json_layout.layout_rows([b"[1]"], 0, 1) == b"[\n  1\n]"


# --- the reference --------------------------------------------------------------------------


def _separator(depth: int) -> str:
    return ",\n" + "  " * depth


def _reference(texts: Sequence[bytes | str], depth: int) -> bytes:
    """The Python path: each text parsed exactly, then the engine's reference encoder (the
    §5.4 escaping written from the rule) at ``depth``, joined as array elements."""

    def encoded(text: bytes | str) -> str:
        out: list[str] = []
        _encode_into(parse_json_exact_fractions(text), depth, out, _spec_escape)
        return "".join(out)

    # a fresh stack when the test's own is too deep for a value of the engine's bound
    return _to_utf8(_separator(depth).join(with_stack_retry(encoded, text) for text in texts))


def _reference_or_none(texts: Sequence[bytes | str], depth: int) -> bytes | None:
    """:func:`_reference`, or ``None`` when the Python path refuses a text."""
    try:
        return _reference(texts, depth)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, JsonDepthError
        return None


def _document_rows(values: Sequence[object]) -> bytes:
    """The rows part of ``dumps_document`` with ``values`` as the rows of one table."""
    document = dumps_document({"d": {"t": cast(Sequence[Row], values)}})
    head, tail = b'{\n  "d": {\n    "t": [\n      ', b"\n    ]\n  }\n}"
    assert document.startswith(head)
    assert document.endswith(tail)
    return document[len(head) : -len(tail)]


def _check(texts: Sequence[bytes | str], depth: int) -> bytes:
    """layout_rows of ``texts`` accepted and equal to the reference; returns the bytes."""
    data = layout_rows(texts, depth)
    assert data is not None, texts
    assert data == _reference(texts, depth)
    return data


def _accepted_or_declined(texts: Sequence[bytes | str], depth: int = ROW_DEPTH) -> None:
    """Hostile input: ``None``, or exactly the reference's bytes (which then exist)."""
    data = layout_rows(texts, depth)
    if data is not None:
        assert data == _reference(texts, depth)


# --- generated JSON texts -------------------------------------------------------------------


@dataclass(frozen=True)
class _Number:
    """A number in the generated tree, by its JSON text."""

    text: str


_Tree: TypeAlias = bool | str | _Number | list["_Tree"] | dict[str, "_Tree"] | None

_NUMBER_GRAMMAR = r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,4})?"
_EXOTIC_NUMBERS = [
    "0", "-0", "-0.0", "0.0", "1.0", "1.50", "1e5", "1E+05", "1e-05", "2.5e-7", "1E400",
    "-1E-400", "12345678901234567890", "-9223372036854775809", "18446744073709551616",
    "3.14159265358979323846264338327950288", "1" * 5000, "-" + "9" * 4001, "1." + "0" * 300,
]  # fmt: skip
_numbers = (
    st.sampled_from(_EXOTIC_NUMBERS)
    | st.integers().map(str)
    | st.floats(allow_nan=False, allow_infinity=False).map(repr)
    | st.from_regex(_NUMBER_GRAMMAR, fullmatch=True)
).map(_Number)

#: Characters that matter: every control, the escaped ones, '/', DEL and C1, the surrogate
#: neighbours (U+D7FF, U+E000), U+FFFF, astral, a JSON-hostile line separator.
_SPECIAL = [chr(c) for c in range(0x20)] + [
    '"', "\\", "/", "\x7f", "\x80", "\x9f", "é", "\u2028", "\ud7ff", "\ue000", "\uffff",
    "\U00010000", "\U0001f600", "\U0010ffff", "%", "None",
]  # fmt: skip
_chars = st.characters(codec="utf-8") | st.sampled_from(_SPECIAL)
_strings = st.lists(_chars, max_size=10).map("".join)
#: Keys whose code-point order differs from their UTF-16 order (U+E000..U+FFFF sort before
#: astral characters by code point, after them in UTF-16), prefixes, NUL, escapes.
_KEYS = ["", "a", "A", "ab", "a\x00", "\x00", "é", "\ue000", "\uffff", "\U00010000",
         "\U0001f600", '"', "\\", "id", "amount", "metadata", "Z", "z"]  # fmt: skip
_keys = st.sampled_from(_KEYS) | _strings

_trees: st.SearchStrategy[_Tree] = st.recursive(
    st.none() | st.booleans() | _numbers | _strings,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_keys, inner, max_size=6),
    max_leaves=25,
)

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                  "\r": "\\r", "\t": "\\t"}  # fmt: skip


def _u_escape(char: str, upper: bool) -> str:
    """``\\uXXXX`` of a character, astral ones as a surrogate pair."""
    units = char.encode("utf-16-be")
    hex_units = [units[i : i + 2].hex() for i in range(0, len(units), 2)]
    return "".join("\\u" + (h.upper() if upper else h) for h in hex_units)


@st.composite
def _string_literal(draw: st.DrawFn, value: str) -> str:
    """A JSON string literal of ``value``, each character written raw (when JSON allows),
    as a short escape, or as ``\\u`` in lower or upper case, as other producers do."""
    out = ['"']
    for char in value:
        styles = ["lower", "upper"]
        if char in _SHORT_ESCAPES:
            styles.append("short")
        if char not in '"\\' and char >= " ":
            styles += ["raw", "raw"]
        style = draw(st.sampled_from(styles))
        if style == "raw":
            out.append(char)
        elif style == "short":
            out.append(_SHORT_ESCAPES[char])
        else:
            out.append(_u_escape(char, upper=style == "upper"))
    return "".join([*out, '"'])


_whitespace = st.text(alphabet=" \t\n\r", max_size=2)


@st.composite
def _text_of(draw: st.DrawFn, tree: _Tree) -> str:
    """JSON text of ``tree`` with drawn whitespace between all tokens and drawn escapes."""

    def ws() -> str:
        return draw(_whitespace)

    def render(node: _Tree) -> str:
        if node is None or isinstance(node, bool):
            return json.dumps(node)
        if isinstance(node, _Number):
            return node.text
        if isinstance(node, str):
            return draw(_string_literal(node))
        if isinstance(node, list):
            items = [ws() + render(item) + ws() for item in node]
            return "[" + (",".join(items) if items else ws()) + "]"
        members = [
            ws() + draw(_string_literal(key)) + ws() + ":" + ws() + render(value) + ws()
            for key, value in node.items()
        ]
        return "{" + (",".join(members) if members else ws()) + "}"

    return ws() + render(tree) + ws()


_texts = _trees.flatmap(_text_of)


def _as_input(text: str, kind: str) -> bytes | str:
    return text.encode() if kind == "bytes" else text


_kinds = st.sampled_from(["bytes", "str"])


# --- equivalence ----------------------------------------------------------------------------


@native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_texts, min_size=1, max_size=4), st.integers(0, 6), _kinds)
def test_generated_texts_match_the_reference(texts: list[str], depth: int, kind: str) -> None:
    _check([_as_input(t, kind) for t in texts], depth)


@native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_texts, min_size=1, max_size=4))
def test_values_as_rows_match_dumps_document(texts: list[str]) -> None:
    """At the rows' depth, the bytes of ``dumps_document`` itself (any value as a row)."""
    values = [parse_json_exact_fractions(t) for t in texts]
    assert layout_rows([t.encode() for t in texts], ROW_DEPTH) == _document_rows(values)


_objects = st.dictionaries(_keys, _trees, min_size=1, max_size=6).flatmap(_text_of)


@native
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_objects, min_size=1, max_size=3), st.integers(1, 5))
def test_row_objects_match_the_engines_row_encoder(texts: list[str], depth: int) -> None:
    """Row texts (objects) at any depth: the production row encoder ``encode_row``."""
    rows = [cast(Row, parse_json_exact_fractions(t)) for t in texts]
    expected = _separator(depth).join(encode_row(row, depth) for row in rows).encode()
    assert layout_rows([t.encode() for t in texts], depth) == expected


@native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_texts, min_size=1, max_size=5))
def test_json_column_texts_match_the_connectors_path(texts: list[str]) -> None:
    """A JSON column as the connectors parse it (``fastjson.parse_json_column``, fractions as
    orjson fragments) in a ``FastRowBatch``, written by the engine's writer (orjson when it
    accepts): the same bytes as the row texts ``{"v": <text>}`` laid out here."""
    column = parse_json_column(texts, canonical_ints=False)
    written = bytes(_rows_bytes(FastRowBatch(["v"], [column], json_columns=[0])))
    assert layout_rows(['{"v":' + t + "}" for t in texts], ROW_DEPTH) == written


@native
def test_layout_in_detail() -> None:
    """The layout rules spelled out on one value (§5.4)."""
    text = b'{"b":[1,2.50,{},[]],"a":"x\\u00E9\\/\\u001F\\ud83d\\ude00\\"","c":{"z":null,"y":-0}}'
    assert layout_value(text, 1) == (
        b"{\n"
        b'    "a": "x\xc3\xa9/\\u001f\xf0\x9f\x98\x80\\"",\n'
        b'    "b": [\n      1,\n      2.50,\n      {},\n      []\n    ],\n'
        b'    "c": {\n      "y": -0,\n      "z": null\n    }\n'
        b"  }"
    )
    assert layout_rows([b" 1 ", b'"x"', b"{}"], 2) == b'1,\n    "x",\n    {}'
    assert layout_rows([], 3) == b""


@native
@pytest.mark.parametrize(
    ("keys", "order"),
    [
        # code point order, not UTF-16's: U+FFFF sorts before U+10000
        (["\U00010000", "\uffff", "\ue000"], ["\ue000", "\uffff", "\U00010000"]),
        (["ab", "a", "", "a\x00"], ["", "a", "a\x00", "ab"]),
        (["b", "B", "é", "e"], ["B", "b", "e", "é"]),
    ],
)
def test_keys_sort_by_code_point(keys: list[str], order: list[str]) -> None:
    text = "{" + ",".join(f"{json.dumps(k)}: 0" for k in keys) + "}"
    data = _check([text.encode()], 0)
    assert list(json.loads(data)) == order


@native
@pytest.mark.parametrize("escape", ['"\\u00e9"', '"\\u00E9"', '"é"'])
def test_strings_are_decoded_and_written_canonically(escape: str) -> None:
    assert layout_value(escape.encode(), 0) == '"é"'.encode()


@native
@pytest.mark.parametrize("number", _EXOTIC_NUMBERS)
def test_numbers_are_copied_as_received(number: str) -> None:
    assert layout_value(f"[{number}]".encode(), 0) == f"[\n  {number}\n]".encode()
    _check([f"[{number}]"], 0)


@native
def test_bytes_like_inputs() -> None:
    text = b'{"b": 1, "a": [true]}'
    expected = _reference([text], 3)
    for given_text in (text, bytearray(text), memoryview(b"xx" + text)[2:], text.decode()):
        assert layout_rows([given_text], 3) == expected


# --- depth ----------------------------------------------------------------------------------


def _nested(levels: int) -> bytes:
    """A value nesting ``levels`` containers, objects and arrays alternating."""
    pairs = levels // 2
    return b'{"a":[' * pairs + (b"[]" if levels % 2 else b"0") + b"]}" * pairs


@native
def test_nesting_up_to_the_engines_bound() -> None:
    """``max_depth`` defaults to ``MAX_JSON_DEPTH`` (``[]`` nests 1): the deepest value the
    engine writes is accepted, one level more declines (the Python path refuses it)."""
    for levels in (MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH):
        _check([_nested(levels)], ROW_DEPTH + 1)
    deeper = _nested(MAX_JSON_DEPTH + 1)
    assert layout_rows([deeper], ROW_DEPTH) is None
    # whole-row texts: one level more, when the caller says so
    row = b'{"m": ' + _nested(MAX_JSON_DEPTH) + b"}"
    assert layout_rows([row], ROW_DEPTH) is None
    assert layout_rows([row], ROW_DEPTH, max_depth=MAX_JSON_DEPTH + 1) == _reference(
        [row], ROW_DEPTH
    )


@native
@pytest.mark.parametrize("levels", [100_000, 1_000_000])
def test_deep_nesting_declines_quickly(levels: int) -> None:
    started = time.process_time()
    for text in (b"[" * levels, b"[" * levels + b"]" * levels, b'{"a":' * levels):
        assert layout_rows([text], ROW_DEPTH) is None
    assert time.process_time() - started < 1.0


@native
def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="depth"):
        layout_rows([b"1"], -1)
    with pytest.raises(ValueError, match="max_depth"):
        layout_rows([b"1"], 0, max_depth=2**21)
    with pytest.raises(TypeError):
        layout_rows([b"1", 1], 0)  # type: ignore[list-item]
    with pytest.raises(TypeError):
        layout_rows(1, 0)  # type: ignore[arg-type]


# --- declines -------------------------------------------------------------------------------

_DECLINED = {
    "empty": b"",
    "only whitespace": b" \n",
    "trailing garbage": b"[1] x",
    "two values": b"1 2",
    "trailing comma": b"[1,]",
    "trailing comma in object": b'{"a":1,}',
    "missing colon": b'{"a" 1}',
    "unquoted key": b"{a:1}",
    "single quotes": b"'a'",
    "NaN": b"NaN",
    "Infinity": b"[Infinity]",
    "-Infinity": b"-Infinity",
    "leading zero": b"01",
    "leading plus": b"+1",
    "bare minus": b"-",
    "fraction without digits": b"1.",
    "dot first": b".5",
    "exponent without digits": b"1e",
    "exponent sign only": b"1e+",
    "hex": b"0x10",
    "capital literal": b"True",
    "truncated literal": b"nul",
    "raw control in string": b'"a\nb"',
    "raw tab in string": b'"\t"',
    "raw NUL in string": b'"\x00"',
    "NUL outside": b"\x001",
    "unknown escape": b'"\\a"',
    "short \\u": b'"\\u12"',
    "bad hex": b'"\\u12g4"',
    "lone high surrogate": b'"\\ud800"',
    "lone low surrogate": b'"\\udc00"',
    "high surrogate then text": b'"\\ud83dx"',
    "high surrogate then non-low escape": b'"\\ud83d\\u0041"',
    "two high surrogates": b'"\\ud83d\\ud83d"',
    "reversed pair": b'"\\ude00\\ud83d"',
    "surrogate key": b'{"\\udfff": 1}',
    "invalid UTF-8 byte": b'"\xff"',
    "continuation byte alone": b'"\x80"',
    "overlong slash": b'"\xc0\xaf"',
    "overlong 3 bytes": b'"\xe0\x80\xaf"',
    "encoded surrogate": b'"\xed\xa0\x80"',
    "beyond U+10FFFF": b'"\xf4\x90\x80\x80"',
    "truncated sequence": b'"\xe2\x82"',
    "UTF-8 BOM": b"\xef\xbb\xbf1",
    "UTF-16 BOM": b"\xff\xfe1\x00",
    "UTF-16 text": '["a"]'.encode("utf-16-le"),
    "non-ASCII outside strings": b"[1,\xc2\xa0 2]",
    "form feed as whitespace": b"[1,\x0c2]",
    "duplicate key": b'{"a":1,"a":2}',
    "duplicate key by escape": b'{"a":1,"\\u0061":2}',
    "nested duplicate key": b'[{"b":{"x":1,"y":2,"x":3}}]',
    "duplicate among unsorted keys": b'{"c":1,"b":2,"a":3,"b":4}',
    "unterminated string": b'"abc',
    "unterminated escape": b'"\\',
    "unterminated pair": b'"\\ud83d\\u',
    "unterminated array": b"[1,2",
    "unterminated object": b'{"a":1',
    "unclosed key": b'{"a',
    "mismatched brackets": b"[1}",
    "extra closer": b"[1]]",
    "too deep": b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1),
}


@native
@pytest.mark.parametrize("text", list(_DECLINED.values()), ids=list(_DECLINED))
def test_declined(text: bytes) -> None:
    assert layout_value(text, ROW_DEPTH) is None
    # in a batch, one declined text declines the batch
    assert layout_rows([b"1", text, b"2"], ROW_DEPTH) is None


@native
def test_a_str_with_a_lone_surrogate_declines() -> None:
    assert layout_value('"\ud800"', 0) is None  # no UTF-8 for it: declined, not an error


def test_without_the_native_module_everything_declines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_layout, "_native_layout", None)
    assert layout_rows([b"1"], 0) is None
    assert layout_value(b"[]", 3) is None


def test_a_host_without_the_module_imports_the_api() -> None:
    """The module absent (a build without a C compiler): the API imports and declines."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["fetcher.adapters.jsonlayout._native"] = None  # import fails as when not built
        from fetcher.adapters.jsonlayout import texts as json_layout
        assert not json_layout.NATIVE
        assert json_layout.layout_rows([b"1"], 3) is None
        print("declined")
        """
    )
    run = subprocess.run(  # noqa: S603 - this interpreter, a fixed script, no shell
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=60
    )
    assert run.stdout.strip() == "declined", run.stderr


# --- hostile input --------------------------------------------------------------------------


@native
@settings(max_examples=1000, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=3))
def test_random_bytes(texts: list[bytes]) -> None:
    _accepted_or_declined(texts)


_TOKENS = [b"[", b"]", b"{", b"}", b":", b",", b'"', b"\\", b"u", b"d83d", b"de00", b"0", b"-",
           b".", b"e", b"1", b" ", b"\n", b"true", b"null", b"\xc3\xa9", b"\xf0\x9f\x98\x80",
           b"\xed", b"\x1f", b'"a"', b"\\u00"]  # fmt: skip
_json_bytes = st.sampled_from(_TOKENS)


@native
@settings(max_examples=2000, deadline=None)
@given(st.lists(_json_bytes, max_size=30).map(b"".join))
def test_json_like_noise(text: bytes) -> None:
    """Token soup: mostly invalid, sometimes valid, often nearly valid."""
    _accepted_or_declined([text])


@native
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_texts, st.data())
def test_truncated_and_mutated_texts(text: str, data: st.DataObject) -> None:
    """Every prefix of a valid text, given as a view whose next bytes are the rest of the
    text (reading past the end would see them), and single-byte mutations."""
    raw = text.encode()
    view = memoryview(raw)
    for end in range(len(raw)):
        result = layout_rows([view[:end]], ROW_DEPTH)
        if result is not None:
            assert result == _reference([raw[:end]], ROW_DEPTH)
    if raw:
        at = data.draw(st.integers(0, len(raw) - 1))
        byte = data.draw(st.integers(0, 255))
        _accepted_or_declined([raw[:at] + bytes([byte]) + raw[at + 1 :]])
        _accepted_or_declined([raw[:at] + raw[at + 1 :]])
        _accepted_or_declined([raw[:at] + bytes([byte]) + raw[at:]])


@native
def test_huge_strings_and_containers() -> None:
    controls = "".join(map(chr, range(0x20))) * 40_000  # 1.28 M characters, all escaped
    text = json.dumps({"s": controls, "t": "é" * 1_000_000, "u": "\\" * 500_000})
    data = _check([text.encode()], ROW_DEPTH)
    assert len(data) > 8_000_000
    wide = "{" + ",".join(f'"k{i:06d}": [{i}]' for i in reversed(range(200_000))) + "}"
    _check([wide], 1)
    long_array = "[" + ",".join(["1.10"] * 500_000) + "]"
    _check([long_array], 2)


@native
def test_no_leaks_on_any_path() -> None:
    """Accepted, declined (at every stage) and refused calls leave no memory behind and no
    reference to their arguments."""
    texts: list[object] = [b'{"b": [1, "\\u00e9"], "a": {}}', '{"c": 2, "b": 1}']
    hostile = [[b"1", text] for text in _DECLINED.values()]
    calls: list[Callable[[], object]] = [
        lambda: layout_rows(cast(Sequence[bytes], texts), 3),
        *[(lambda batch=batch: layout_rows(batch, 3)) for batch in hostile],
        lambda: layout_rows(['"\ud800"'], 3),
    ]

    def refused() -> None:
        with pytest.raises(TypeError):
            layout_rows(cast(Sequence[bytes], [b"1", None]), 3)

    calls.append(refused)
    assert_no_leaks(calls, [texts, *texts])


#: Lays each text out from a view that ends right before a PROT_NONE page, so a
#: single byte read past a text's end kills the process (SIGSEGV) instead of passing unseen.
_GUARDED = textwrap.dedent(
    """
    import ctypes, mmap, random, sys
    from fetcher.adapters.jsonlayout._native import layout_rows

    page = mmap.PAGESIZE
    area = mmap.mmap(-1, 2 * page)
    address = ctypes.addressof(ctypes.c_char.from_buffer(area))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.mprotect(address + page, page, 0) != 0:  # PROT_NONE
        raise OSError(ctypes.get_errno(), "mprotect")
    whole = memoryview(area)

    def guarded(text):
        start = page - len(text)
        whole[start:page] = text
        return whole[start:page]

    samples = [line for line in sys.stdin.buffer.read().split(b"\\x1e") if line]
    rng = random.Random(23)
    accepted = 0
    for sample in samples:
        for end in range(len(sample) + 1):
            accepted += layout_rows([guarded(sample[:end])], 3, 250) is not None
        for _ in range(50):
            noise = bytes(rng.choice(sample + b'"\\\\u{[') for _ in range(rng.randint(0, 30)))
            layout_rows([guarded(noise)], 3, 250)
    print("ok", accepted)
    """
)

_GUARD_SAMPLES = [
    '{"a": [1, -2.5e+10, true, false, null], "b": {"c": "d\\u00e9\\ud83d\\ude00\\n"}}',
    '"\\ud83d\\ude00"',
    "-0.0e-1",
    '["\u00e9\U0001f600", "\\"\\\\\\/\\b\\f\\n\\r\\t", {}]',
    '{"z": 1, "y": 2, "x": {"b": [], "a": "\\u001F"}}',
    "[[[[[]]]]]",
    "12345678901234567890",
    "true",
]


@native
def test_no_read_past_a_texts_end() -> None:
    run = subprocess.run(  # noqa: S603 - this interpreter, a fixed script, no shell
        [sys.executable, "-c", _GUARDED],
        input="\x1e".join(_GUARD_SAMPLES).encode(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:].decode(errors="replace"))
    assert run.stdout.split()[0] == b"ok"
    assert int(run.stdout.split()[1]) >= len(_GUARD_SAMPLES)  # each whole sample accepted


@native
def test_random_mutations_of_a_ledger_batch() -> None:
    """A seeded sweep over the bench's row shape: every mutation declines or matches."""
    rng = random.Random(2300)  # noqa: S311 - a reproducible sweep, not a secret
    row = (
        b'{"amount": "1234.50", "created_at": "2026-01-01T00:00:01.001Z", "email": '
        b'"user1@example.com", "id": "c4ca4238-a0b9-3382-8dcc-509a6f75849b", "metadata": '
        b'{"ref": "R-1", "tags": ["t1", "x"], "score": 0.125, "attempt": 1, "channel": "pos"}, '
        b'"status": "settled"}'
    )
    _check([row], ROW_DEPTH)
    for _ in range(3000):
        mutated = bytearray(row)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(mutated))
            mutated[at] = rng.choice(b'{}[]",:\\ 0-.eE\x00\xff\xc3u')
        _accepted_or_declined([bytes(mutated)])
