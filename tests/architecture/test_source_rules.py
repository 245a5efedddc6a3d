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


def _imported_modules(tree: ast.Module) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


#: Outside the engine, only these engine modules may be imported: its §1.4 API, the kit of
#: building blocks for Fetcher's own adapters and services, and the fakes for tests.
ENGINE_SURFACE = frozenset({"fetcher.engine", "fetcher.engine.kit", "fetcher.engine.testing"})


def test_other_rings_use_only_the_engines_declared_surface() -> None:
    """Issue 11: the engine's submodules are private; other rings import ``fetcher.engine``
    (§1.4) or ``fetcher.engine.kit``, never ``fetcher.engine.values`` and the like."""
    found = [
        f"{path.relative_to(SRC)}:{line} {module}"
        for path, tree in _modules()
        if path.relative_to(SRC).parts[0] != "engine"
        for line, module in _imported_modules(tree)
        if module.startswith("fetcher.engine") and module not in ENGINE_SURFACE
    ]
    assert found == []


def test_the_kit_adds_to_the_engine_api_without_repeating_it() -> None:
    import fetcher.engine
    import fetcher.engine.kit

    kit = fetcher.engine.kit.__all__
    assert [name for name in kit if not hasattr(fetcher.engine.kit, name)] == []
    assert len(set(kit)) == len(kit)
    assert set(kit).isdisjoint(fetcher.engine.__all__)


def _kernel_contract() -> dict[str, list[str]]:
    import tomllib

    config = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    found: dict[str, list[str]] = next(
        c for c in contracts if str(c["name"]).startswith("The services kernel")
    )
    return found


def test_every_module_at_the_top_of_services_is_in_the_kernel_contract() -> None:
    """``services/`` holds the kernel as modules and the use cases as packages: a module added
    at the top is kernel, so the import-linter contract that keeps it below every group must
    name it (or it could import a group unchecked)."""
    services = SRC / "services"
    top = {f"fetcher.services.{p.stem}" for p in services.glob("*.py") if p.stem != "__init__"}
    groups = {
        f"fetcher.services.{p.name}" for p in services.iterdir() if (p / "__init__.py").exists()
    }
    contract = _kernel_contract()
    assert set(contract["source_modules"]) == top
    assert set(contract["forbidden_modules"]) == groups
