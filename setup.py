"""The optional C extension (the rest of the build is pyproject.toml's).

``fetcher.adapters.jsonlayout._native`` lays JSON texts out as contract §5.4 bytes in C (issue 23;
``fetcher.adapters.jsonlayout.texts`` is its Python API). It is optional: without a C compiler or
the Python headers the build warns and goes on, and the API then declines every call, which
leaves the work to the pure-Python path (same bytes, slower).
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup

# -O2 with every warning: the source compiles without one (gcc, clang). Other compilers keep
# their defaults.
_FLAGS = [] if sys.platform == "win32" else ["-O2", "-Wall", "-Wextra"]

setup(
    ext_modules=[
        Extension(
            "fetcher.adapters.jsonlayout._native",
            sources=["src/fetcher/adapters/jsonlayout/_native.c"],
            extra_compile_args=_FLAGS,
            optional=True,
        )
    ]
)
