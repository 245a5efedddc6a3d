"""Property: for any §5.1-shaped document, streaming it back through open_result (with tiny
spool chunks, so every token and multi-byte character can straddle a chunk boundary) gives
exactly json.loads of its bytes, table by table, and the exact plaintext bytes."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fetcher.consumer.result as result_module
from fetcher.consumer import ConsumerKeys, LocalFolderSource, ResultRef, open_result
from tests.unit.consumer.conftest import MASTER_KEY, store_document

KEYS = ConsumerKeys.from_master(MASTER_KEY)
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | text
    | st.floats(allow_nan=False, allow_infinity=False)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
rows = st.lists(st.dictionaries(text, values, max_size=4), max_size=4)
documents = st.dictionaries(text, st.dictionaries(text, rows, max_size=3), max_size=3)


@pytest.mark.parametrize("indent", [2, None])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, chunk=st.integers(1, 64))
async def test_streamed_rows_equal_json_loads(
    doc: dict[str, Any], chunk: int, indent: int | None
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(result_module, "SPOOL_CHUNK_SIZE", chunk)
        await check(doc, chunk, indent)


async def check(doc: dict[str, Any], chunk: int, indent: int | None) -> None:
    plain = json.dumps(doc, indent=indent, sort_keys=True, ensure_ascii=False).encode()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        key, mac = store_document(root, KEYS, plain)
        source = LocalFolderSource(root, chunk_size=chunk)
        with await open_result(ResultRef(key, mac, len(plain)), source, KEYS) as result:
            assert b"".join(result.iter_bytes()) == plain
            streamed = [(t.datasource, t.table, list(t.rows)) for t in result.tables()]
    expected = json.loads(plain)
    assert streamed == [
        (ds, table, table_rows)
        for ds, tables in expected.items()
        for table, table_rows in tables.items()
    ]
