"""Issue 39: Python code that runs in the middle of a C layout call cannot make it read freed
memory. The C (``fetcher/adapters/jsonlayout/_native.c``, see its top comment) calls back into
Python at these points only:

* a bytes-like text's buffer: a class's ``__buffer__`` (Python 3.12 and later);
* an allocation of a tracked object, where Python 3.11 may collect garbage and run a
  ``__del__``: the ``UnicodeEncodeError`` of a lone surrogate (the other errors the C meets, a
  ``ValueError`` of an int past the str digits limit, a ``BufferError``, a ``TypeError``, are
  set unnormalized: no object is made inside the call);
* the release of a reference the C held: the item it just laid out (``item_at``), freed
  there when a ``__buffer__`` emptied the list meanwhile.

No other protocol is called (no ``__index__``, ``__float__``, ``__str__`` of a caller's
object, comparison or hashing). Each test empties the caller's list from such a point and
checks the call still answers correctly: the C holds the item it reads, re-reads the
caller's sequence for the next one and declines when its length changed. Where the point is a
collection, the test also checks that the ``__del__`` ran during the call. ``make fuzz`` runs
these under AddressSanitizer, on Python 3.11 and 3.12, where a read of freed memory stops the
run.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from fetcher.adapters.jsonlayout import ColumnKind, column_plan, layout_columns, texts
from fetcher.engine.kit import ROW_DEPTH

native = pytest.mark.skipif(
    not texts.NATIVE, reason="the C extension fetcher.adapters.jsonlayout._native is not built"
)
#: Since 3.12 the collector runs only between bytecodes, never inside a C call that runs none.
collects_in_c = pytest.mark.skipif(
    sys.version_info >= (3, 12),
    reason="Python 3.12+ collects garbage only between bytecodes, not inside the C call",
)
has_buffer_protocol = pytest.mark.skipif(
    not hasattr(bytes, "__buffer__"),
    reason="this interpreter has no __buffer__ (Python 3.12+): a class cannot export a buffer",
)


@contextmanager
def _garbage_that_empties(target: list[object], ran: list[bool]) -> Iterator[None]:
    """A reference cycle whose ``__del__`` empties ``target`` and records that it ran, with the
    collector made to run at the next allocation of a tracked object."""

    class Empties:
        def __init__(self) -> None:
            self.cycle = self

        def __del__(self) -> None:
            target.clear()
            ran.append(True)

    thresholds = gc.get_threshold()
    gc.collect()
    Empties()  # unreachable now, freed only by a collection
    gc.set_threshold(1)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.collect()


def _during(call: Callable[[], object], target: list[object]) -> object:
    """``call()`` with garbage whose ``__del__`` empties ``target``; asserts it ran inside."""
    ran: list[bool] = []
    with _garbage_that_empties(target, ran):
        result = call()
        inside = bool(ran)
    assert inside, "the collection ran outside the call: the test did not reach the point"
    assert target == []
    return result


_TEXTS = [b"[%d]" % i for i in range(200)]


@native
@has_buffer_protocol
def test_a_buffer_that_empties_the_texts_list_is_read_safely() -> None:
    """The issue's reproduction, in a child process (the old code crashed it, ASan: a read of
    freed memory): the text being read is held by the call, and the emptied list declines."""
    script = textwrap.dedent(
        """
        from fetcher.adapters.jsonlayout import _native as m
        class Evil:
            def __buffer__(self, flags):
                texts.clear(); return memoryview(b"[1]")
        texts = [Evil()] + [b"[%d]" % i for i in range(1000)]
        laid = m.layout_rows(texts, 0, 10)
        assert texts == [], texts
        assert laid is None, laid[:200]
        class Kept:  # changes nothing: laid out as any bytes-like text
            def __buffer__(self, flags):
                return memoryview(b"[1]")
        assert m.layout_rows([Kept(), b"[2]"], 0, 10) == m.layout_rows([b"[1]", b"[2]"], 0, 10)
        print("declined")
        """
    )
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (0, "declined\n"), done.stderr[-3000:]


@native
@has_buffer_protocol
def test_a_buffer_that_raises_leaves_nothing_behind() -> None:
    class Raises:
        def __buffer__(self, flags: int) -> memoryview:
            items.clear()
            raise RuntimeError("no buffer")

    items: list[object] = [b"[0]", Raises(), b"[2]"]
    with pytest.raises(RuntimeError, match="no buffer"):
        texts.layout_rows(items, 0)  # type: ignore[arg-type]


@native
@collects_in_c
def test_a_collection_that_empties_the_texts_list_declines() -> None:
    """The ``UnicodeEncodeError`` of a lone surrogate collects garbage whose ``__del__`` empties
    the caller's list: the call declines without reading the list again."""
    items: list[object] = [*_TEXTS, "lone \ud800", *_TEXTS]
    assert _during(lambda: texts.layout_rows(items, 0), items) is None  # type: ignore[arg-type]


@native
@collects_in_c
def test_a_collection_at_an_encoding_error_leaves_the_texts_alive() -> None:
    """A tuple is read as it is (no copy, no allocation before the error): the collection at
    the ``UnicodeEncodeError`` empties a list that also holds the texts, and the call declines
    with the tuple's texts alive."""
    items: list[object] = [*_TEXTS, "lone \ud800", *_TEXTS]
    passed = tuple(items)
    assert _during(lambda: texts.layout_rows(passed, 0), items) is None  # type: ignore[arg-type]
    assert texts.layout_rows(passed[:1], 0) == b"[\n  0\n]"  # type: ignore[arg-type]


_PLAN = column_plan(["n", "s"], [ColumnKind.NUMBER, ColumnKind.STRING])
_ROWS = [(i, "é" * (i % 7)) for i in range(200)]


@native
@collects_in_c
def test_a_collection_that_empties_the_rows_list_declines() -> None:
    assert _PLAN is not None
    rows: list[object] = [*_ROWS, (1, "lone \ud800"), *_ROWS]
    assert _during(lambda: layout_columns(rows, _PLAN), rows) is None  # type: ignore[arg-type]


@native
@collects_in_c
def test_a_collection_at_an_encoding_error_leaves_the_rows_alive() -> None:
    assert _PLAN is not None
    rows: list[object] = [*_ROWS, (1, "lone \ud800"), *_ROWS]
    passed = tuple(rows)
    assert _during(lambda: layout_columns(passed, _PLAN), rows) is None  # type: ignore[arg-type]
    assert layout_columns(passed[:1], _PLAN, ROW_DEPTH) is not None  # type: ignore[arg-type]


@native
def test_a_strided_memoryview_declines() -> None:
    """Issue 39: a bytes-like text that is not one contiguous run of bytes declines (it raised
    ``BufferError``); a contiguous one is laid out."""
    assert texts.layout_rows([memoryview(b"[1, 2]")[::2]], 0) is None
    assert texts.layout_rows([b"[0]", memoryview(b"[1, 2]")[::2]], 0) is None
    assert texts.layout_rows([memoryview(b"[1, 2]")], 0) == b"[\n  1,\n  2\n]"
