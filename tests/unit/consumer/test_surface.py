"""The consumer kit is a deliberate public surface and a leaf (ARCHITECTURE "Python SDK"):
``__all__`` is pinned, every module imports only the standard library, fetcher.crypto and
itself at import time (psycopg, aioboto3, botocore only lazily, behind their extras), and
importing it loads no server code and no optional driver. Secrets never show in a repr."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import fetcher.consumer
from fetcher.consumer import ConsumerKeys, PostgresDeduplicator, S3Source

PACKAGE = Path(fetcher.consumer.__file__).parent
LAZY_ONLY = {"psycopg", "aioboto3", "botocore"}


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _allowed_eagerly(name: str) -> bool:
    top = name.split(".", maxsplit=1)[0]
    # fetcher.lifecycle is the one async-lifecycle mixin, itself standard library only
    # (tests/architecture/test_engine_imports.py).
    return top in sys.stdlib_module_names or name.startswith(
        ("fetcher.crypto", "fetcher.consumer", "fetcher.lifecycle")
    )


def test_public_names_are_pinned() -> None:
    assert sorted(fetcher.consumer.__all__) == sorted(
        [
            "SINGLE_TENANT",
            "ConsumerKeys",
            "Envelope",
            "Integrity",
            "JobCompleted",
            "JobEvent",
            "JobFailed",
            "Protection",
            "ResultInfo",
            "event_from_feed_item",
            "verify_event",
            "Deduplicator",
            "MemoryDeduplicator",
            "PostgresDeduplicator",
            "LocalFolderSource",
            "ObjectSource",
            "ResultRef",
            "ResultTable",
            "S3Source",
            "VerifiedResult",
            "open_result",
            "open_result_sync",
            "BadSignatureError",
            "ConsumerError",
            "EventError",
            "EventTimeError",
            "FutureEventError",
            "IntegrityError",
            "MalformedEventError",
            "MissingHeaderError",
            "ResultError",
            "ResultFormatError",
            "ResultNotFoundError",
            "StaleEventError",
            "TenantMismatchError",
            "UnknownSchemaVersionError",
        ]
    )
    for name in fetcher.consumer.__all__:
        assert hasattr(fetcher.consumer, name), name


def _eager(statements: list[ast.stmt]) -> set[str]:
    """Imports that run at import time: everything but function bodies."""
    names: set[str] = set()
    for node in statements:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(node, ast.ClassDef):
            names |= _eager(node.body)
        else:
            names |= _imports(node)
    return names


def test_every_module_imports_only_stdlib_crypto_and_lazy_extras() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 6
    for path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name in _eager(tree.body):
            assert _allowed_eagerly(name), f"{path.name} imports {name} at import time"
        for name in _imports(tree):
            top = name.split(".")[0]
            assert _allowed_eagerly(name) or top in LAZY_ONLY, f"{path.name} imports {name}"


def test_importing_the_kit_loads_no_server_code_and_no_driver() -> None:
    probe = (
        "import sys, fetcher.consumer; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('aioboto3','botocore','psycopg','httpx','fastapi','pydantic','aio_pika') "
        "or m.startswith(('fetcher.engine','fetcher.manager','fetcher.worker',"
        "'fetcher.services','fetcher.adapters','fetcher.bootstrap','fetcher.settings'))))"
    )
    out = subprocess.run(  # noqa: S603 - this interpreter, a fixed probe
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_no_secret_in_repr() -> None:
    keys = ConsumerKeys(external_hmac=b"\xaa" * 32, storage=b"\xbb" * 32)
    assert "aa" * 4 not in repr(keys)
    assert "bb" * 4 not in repr(keys)
    s3 = S3Source("b", access_key_id="AKIA-sentinel", secret_access_key="sk-sentinel-value")
    assert "sentinel" not in repr(s3)
    dedup = PostgresDeduplicator("postgresql://u:pw-sentinel@db/x")
    assert "sentinel" not in repr(dedup)
