# The C extension _native.c (optional: absent when built without a C compiler).
# Its API and contract: fetcher.adapters.jsonlayout.texts and .columns.
from collections.abc import Sequence

def layout_rows(
    texts: Sequence[bytes | bytearray | memoryview | str],
    depth: int,
    max_depth: int,
    /,
) -> bytes | None: ...
def layout_columns(
    rows: Sequence[object],
    order: tuple[int, ...],
    keys: tuple[bytes, ...],
    kinds: bytes,
    depth: int,
    max_depth: int,
    /,
) -> bytes | None: ...
