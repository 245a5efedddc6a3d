"""``bench/`` stays lean (issue 34): scripts run as ``python -m bench.<script>`` with no
``sys.path`` edits, share helpers only through ``bench.support`` (never another script's
names), each is described in bench/README.md, and a result file is committed only when a page
of the documentation cites it."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.name != "__init__.py")
#: ``make bench``'s runner calls the scripts it runs; no other script imports one.
RUNNER = BENCH / "run.py"


def _bench_imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every ``from bench… import …`` and ``import bench…`` in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bench":
            found.append((str(node.module), [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.split(".")[0] == "bench"]
    return found


def test_there_are_scripts_and_a_support_package() -> None:
    assert len(SCRIPTS) > 10
    assert (BENCH / "support" / "__init__.py").is_file()


def test_no_sys_path_edits_in_bench() -> None:
    edits = [
        f"{path.relative_to(ROOT)}"
        for path in sorted(BENCH.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    ]
    assert edits == []


def test_scripts_share_only_through_the_support_package() -> None:
    wrong = []
    for path in sorted(BENCH.rglob("*.py")):
        for module, names in _bench_imports(path):
            private = [n for n in names if n.startswith("_")]
            if private:
                wrong.append(f"{path.relative_to(ROOT)}: {module} {private}")
            if not (module.startswith("bench.support") or path == RUNNER):
                wrong.append(f"{path.relative_to(ROOT)} imports {module} {names}")
    assert wrong == []


def test_the_readme_describes_every_script() -> None:
    readme = (BENCH / "README.md").read_text()
    assert [p.name for p in SCRIPTS if f"| `{p.name}` |" not in readme] == []


def _committed_results() -> list[str]:
    """The names of the files git tracks under bench/results/ (a run's fresh, uncommitted
    result is no concern here)."""
    listed = subprocess.run(
        ["git", "ls-files", "bench/results"],  # noqa: S607 - git from PATH, fixed arguments
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted(Path(line).name for line in listed.stdout.splitlines())


def test_every_committed_result_is_cited_by_a_page() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    results = _committed_results()
    assert results
    assert [name for name in results if f"bench/results/{name}" not in text] == []
