"""§1.4: ``fetcher.engine`` imports nothing outside the standard library and itself.

An ``ast`` walk over every module of the engine checks each import against
``sys.stdlib_module_names``, so a stray driver import fails here before it ships.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import fetcher.engine

ENGINE_DIR = Path(fetcher.engine.__file__).parent
CRYPTO_DIR = ENGINE_DIR.parent / "crypto"


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module)
    return roots


def _engine_modules() -> list[Path]:
    return sorted(ENGINE_DIR.rglob("*.py"))


def test_the_engine_has_modules() -> None:
    assert len(_engine_modules()) >= 5


@pytest.mark.parametrize("path", _engine_modules(), ids=lambda p: str(p.relative_to(ENGINE_DIR)))
def test_engine_module_imports_only_stdlib(path: Path) -> None:
    for name in _imported_roots(path):
        top = name.split(".")[0]
        allowed = top in sys.stdlib_module_names or name.startswith("fetcher.engine")
        assert allowed, f"{path.name} imports {name}, outside the standard library"


def test_crypto_imports_only_stdlib_and_cryptography() -> None:
    for path in sorted(CRYPTO_DIR.rglob("*.py")):
        for name in _imported_roots(path):
            top = name.split(".")[0]
            assert (
                top in sys.stdlib_module_names
                or top == "cryptography"
                or (name.startswith("fetcher.crypto"))
            ), f"{path.name} imports {name}"


def test_the_lifecycle_mixin_imports_only_stdlib() -> None:
    """``fetcher.lifecycle`` is shared by the server and the SDK, so it may import neither."""
    path = ENGINE_DIR.parent / "lifecycle.py"
    outside = {n for n in _imported_roots(path) if n.split(".")[0] not in sys.stdlib_module_names}
    assert outside == set()
