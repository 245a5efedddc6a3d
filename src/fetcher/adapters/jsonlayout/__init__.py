"""Rows and JSON texts written as contract §5.4 bytes by the paths that must write the same
bytes: the C extension (``_native.c``; :mod:`.texts` lays out JSON texts, :mod:`.columns`
driver rows), the orjson path (:mod:`.fastjson`) and the encoder process that runs it beside
the event loop (:mod:`.encoder_process`). Each path declines (or takes the next one) where it
would not write exactly the engine's reference bytes, so which one runs never shows in the
output.

This module is the package's one entry point: the connectors and the composition root import
from here. ``make fuzz`` builds the extension with AddressSanitizer and UBSan and fuzzes every
entry point of it against the Python twin (``tests/fuzz/``).
"""

from __future__ import annotations

from fetcher.adapters.jsonlayout.columns import (
    ColumnKind,
    ColumnPlan,
    LaidOutBatch,
    column_plan,
    layout_columns,
)
from fetcher.adapters.jsonlayout.encoder_process import BatchEncoder, TextBatch, encoded_batches
from fetcher.adapters.jsonlayout.fastjson import FastRowBatch, encode_rows, parse_json_column
from fetcher.adapters.jsonlayout.texts import NATIVE, layout_rows, layout_value

__all__ = [
    "NATIVE",
    "BatchEncoder",
    "ColumnKind",
    "ColumnPlan",
    "FastRowBatch",
    "LaidOutBatch",
    "TextBatch",
    "column_plan",
    "encode_rows",
    "encoded_batches",
    "layout_columns",
    "layout_rows",
    "layout_value",
    "parse_json_column",
]
