"""The client is a public leaf: ``__all__`` pinned, and only httpx and the standard library
(plus itself) are imported; importing it loads no server code."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import fetcher.client

PACKAGE = Path(fetcher.client.__file__).parent


def test_public_names_are_pinned() -> None:
    assert sorted(fetcher.client.__all__) == sorted(
        [
            "ROUTES",
            "AsyncFetcherClient",
            "AsyncTokenSource",
            "FetcherClient",
            "Job",
            "JobListPage",
            "Route",
            "Submission",
            "TokenSource",
            "ApiError",
            "AuthenticationError",
            "BadRequestError",
            "ConflictError",
            "FetcherError",
            "InvalidAnswerError",
            "NotFoundError",
            "PermissionDeniedError",
            "RateLimitError",
            "SchemaValidationError",
            "ServerError",
            "TransportError",
            "WaitTimeoutError",
        ]
    )


def test_modules_import_only_httpx_and_stdlib() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                ok = top in sys.stdlib_module_names or top == "httpx"
                assert ok or name.startswith("fetcher.client"), f"{path.name} imports {name}"


def test_importing_the_client_loads_no_server_code() -> None:
    probe = (
        "import sys, fetcher.client; print(sorted(m for m in sys.modules if m.startswith("
        "('fetcher.engine','fetcher.manager','fetcher.worker','fetcher.services',"
        "'fetcher.adapters','fetcher.bootstrap','fetcher.settings','fastapi'))))"
    )
    out = subprocess.run(  # noqa: S603 - this interpreter, a fixed probe
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
