"""Loaded at interpreter start by ``make fuzz`` (``PYTHONPATH``): the C layout built with
AddressSanitizer and UBSan (``FETCHER_FUZZ_NATIVE``, a file under ``build/fuzz/``) is put in
place of ``fetcher.adapters.jsonlayout._native`` before anything imports it, in this process
and in every child it starts, so the tests and the fuzzer run the sanitized build and never
the ``.venv``'s own."""

from __future__ import annotations

import importlib.util
import os
import sys

_PATH = os.environ.get("FETCHER_FUZZ_NATIVE")
if _PATH:
    _NAME = "fetcher.adapters.jsonlayout._native"
    _spec = importlib.util.spec_from_file_location(_NAME, _PATH)
    assert _spec is not None, _PATH
    assert _spec.loader is not None, _PATH
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    _module.SANITIZED = True  # type: ignore[attr-defined]  # the tests can tell
    sys.modules[_NAME] = _module
