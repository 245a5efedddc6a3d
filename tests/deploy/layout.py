"""Where the deployment files live, and the variables Fetcher reads (shared by tests/deploy)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "compose.yaml"
COMPOSE_SCHEMA = ROOT / "deploy" / "schema" / "compose-spec.json"
ENTRYPOINT = ROOT / "deploy" / "container" / "fetcher-entrypoint"
SETTINGS_SOURCE = ROOT / "src" / "fetcher" / "settings" / "environment.py"
KUBERNETES_ROOT = ROOT / "deploy" / "kubernetes"
#: The Kustomize base: the manifests every overlay (KUBERNETES_ROOT / "overlays") starts from.
KUBERNETES_DIR = KUBERNETES_ROOT / "base"
#: The virtualenv's scripts (check-jsonschema, fetcher) sit next to the test interpreter.
VENV_BIN = Path(sys.executable).parent

_READERS = {"get", "integer", "boolean"}


def settings_variables() -> frozenset[str]:
    """Every variable ``Settings.from_env`` reads: the first argument of each
    ``get``/``integer``/``boolean`` call in settings/environment.py that is an upper-case string."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(SETTINGS_SOURCE.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _READERS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and re.fullmatch(r"[A-Z][A-Z0-9_]+", node.args[0].value)
        ):
            names.add(node.args[0].value)
    return frozenset(names)


def entrypoint_file_variables() -> dict[str, str]:
    """``<NAME>_FILE`` → ``NAME`` for every secret the image's entry point reads from a file
    (the names of its ``for name in …; do`` loop)."""
    text = ENTRYPOINT.read_text(encoding="utf-8").replace("\\\n", " ")
    match = re.search(r"^for name in ([A-Z0-9_ ]+); do", text, re.MULTILINE)
    assert match, "the entry point's secret loop was not found"
    return {f"{name}_FILE": name for name in match.group(1).split()}
