"""``printable``: control, bidi and separator characters are escaped; other text is kept."""

from __future__ import annotations

from fetcher.cli.terminal import printable


def test_escapes_what_drives_a_terminal() -> None:
    assert printable("a\x1b[31mb\x07") == "a\\x1b[31mb\\x07"
    assert printable("x\u202ey\u2028z\u200b") == "x\\u202ey\\u2028z\\u200b"
    assert printable("tab\tnl\n\x7f") == "tab\\x09nl\\x0a\\x7f"
    assert printable("Zürich 東京 ✓") == "Zürich 東京 ✓"
    assert printable(42) == "42"
