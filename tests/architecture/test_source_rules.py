"""House rules on ``src/`` that a linter does not check for us (issue 11): no ``assert``
(``python -O`` strips it, so it must never guard behaviour) and no function over 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "fetcher"
MAX_FUNCTION_LINES = 60


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(), str(path))) for path in sorted(SRC.rglob("*.py"))]


def test_the_tree_is_found() -> None:
    assert len(_modules()) > 100


def test_no_assert_statement_in_src() -> None:
    found = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert)
    ]
    assert found == []


def test_no_function_over_sixty_lines() -> None:
    found = [
        f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({length} lines)"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    ]
    assert found == []
