"""Coverage-guided fuzz targets for every entry point of the C layout
(``fetcher.adapters.jsonlayout._native``: ``layout_rows`` and ``layout_columns``), each
checked against its Python twin on the same input: the C either declines (``None``) or
writes exactly the twin's bytes, and it never crashes, leaks into freed memory or trips
UBSan (``make fuzz`` builds it with both sanitizers; ``tests/fuzz/run.py`` drives this).

Run one: ``python -m tests.fuzz.targets rows|columns [libFuzzer flags] [corpus dirs]``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import atheris

from fetcher.adapters.jsonlayout import _native
from fetcher.adapters.jsonlayout.columns import column_plan, layout_columns
from fetcher.engine.errors import MAX_JSON_DEPTH
from fetcher.engine.values import parse_json_exact_fractions
from tests.unit.document.test_json_layout import _reference_or_none
from tests.unit.sql import test_mysql_laid_out as mysql_twin
from tests.unit.sql import test_postgres_laid_out as postgres_twin

_TEXT_FORMS: list[Callable[[bytes], object]] = [
    bytes,
    bytearray,
    memoryview,
    lambda data: data.decode("utf-8", "surrogateescape"),  # lone surrogates for bad bytes
    lambda data: data.decode("latin-1"),
    lambda data: memoryview(data)[::2],  # not contiguous: declines
]


def _nesting(value: object) -> int:
    """How many containers ``value`` nests (``[]`` 1, a scalar 0)."""
    if isinstance(value, dict):
        return 1 + max(map(_nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_nesting, value), default=0)
    return 0


def _twin_rows(items: Sequence[object], depth: int, max_depth: int) -> bytes | None:
    """The Python path for ``layout_rows``: ``None`` where it refuses a text or where a value
    nests past ``max_depth`` (the C declines both)."""
    texts: list[bytes | str] = []
    for item in items:
        if isinstance(item, memoryview) and not item.contiguous:
            return None
        text = bytes(item) if isinstance(item, bytes | bytearray | memoryview) else item
        assert isinstance(text, bytes | str)
        try:
            if _nesting(parse_json_exact_fractions(text)) > max_depth:
                return None
        except (ValueError, RecursionError):
            return None
        texts.append(text)
    return _reference_or_none(texts, depth)


def fuzz_rows(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    depth = fdp.ConsumeIntInRange(0, 4)
    max_depth = fdp.PickValueInList([1, 2, 3, 8, MAX_JSON_DEPTH])
    items = []
    for _ in range(fdp.ConsumeIntInRange(1, 3)):
        form = fdp.PickValueInList(_TEXT_FORMS)
        items.append(form(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 512))))
    laid = _native.layout_rows(items, depth, max_depth)
    if laid is not None:
        twin = _twin_rows(items, depth, max_depth)
        assert laid == twin, (items, depth, max_depth, laid, twin)


#: Every value a driver might hand over, of any type, for any column (text the most often).
_VALUES: list[Callable[[atheris.FuzzedDataProvider], object]] = [
    lambda fdp: None,
    lambda fdp: fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 12)),
    lambda fdp: fdp.ConsumeBool(),
    lambda fdp: fdp.ConsumeRegularFloat() if fdp.ConsumeBool() else fdp.ConsumeFloat(),
    lambda fdp: fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 64)),
    lambda fdp: fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 64)),
    lambda fdp: fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 16)),  # may hold a surrogate
    lambda fdp: fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 32)),
    lambda fdp: bytearray(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 8))),
    lambda fdp: fdp.PickValueInList(["23", "-0", "1e3", "2024-01-02 03:04:05.5", "infinity"]),
    lambda fdp: memoryview(fdp.ConsumeBytes(4)),
]


def _value(fdp: atheris.FuzzedDataProvider) -> object:
    return fdp.PickValueInList(_VALUES)(fdp)


def fuzz_columns(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    postgres = fdp.ConsumeBool()
    width = fdp.ConsumeIntInRange(1, 4)
    names = list(dict.fromkeys(fdp.ConsumeUnicodeNoSurrogates(4) or "a" for _ in range(width)))
    rows_of: Callable[[], list[tuple[object, ...]]] = lambda: [  # noqa: E731
        tuple(_value(fdp) for _ in names) for _ in range(fdp.ConsumeIntInRange(1, 3))
    ]
    if postgres:  # PostgreSQL result types (postgres.layout_plan) and its general path
        types = [fdp.PickValueInList(list(postgres_twin._VALUES)) for _ in names]
        plan = postgres_twin._plan(names, types)
        assert plan is not None
        rows = rows_of()
        laid = layout_columns(rows, plan)
        if laid is not None:
            twin = postgres_twin._general(rows, names, types)
            assert laid == twin, (rows, names, types, laid, twin)
    else:  # MySQL's kinds and its general path
        kinds = [fdp.PickValueInList(mysql_twin._MYSQL_KINDS) for _ in names]
        plan = column_plan(names, kinds)
        assert plan is not None
        rows = rows_of()
        laid = layout_columns(rows, plan)
        if laid is not None:
            twin = mysql_twin._general(rows, names, kinds)
            assert laid == twin, (rows, names, kinds, laid, twin)


TARGETS: dict[str, Callable[[bytes], None]] = {"rows": fuzz_rows, "columns": fuzz_columns}

if __name__ == "__main__":
    assert getattr(_native, "SANITIZED", False), "run through make fuzz: the sanitized build"
    atheris.Setup([sys.argv[0], *sys.argv[2:]], TARGETS[sys.argv[1]])
    atheris.Fuzz()
