"""The FET001 rule ``make lint`` adds to PyMarkdown (``markdown_fence_rule.py``, loaded by the
``[tool.pymarkdown]`` section of pyproject.toml, which these tests read as ``make lint`` does)
finds a fence that does not close its block, and leaves nested fences alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from pymarkdown.api import PyMarkdownApi

ROOT = Path(__file__).resolve().parents[2]

# The README's own bug until issue 20: text after the closing backticks keeps the block open,
# so the next heading and table rendered as console text.
UNCLOSED = """# Demo

```console
$ make demo
demo finished: every step passed.
``` `fetcher demo --keep` leaves the server running.

## Command line

| Command | What it does |
|---|---|
| `fetcher run` | Starts the component |
"""


@pytest.fixture(autouse=True)
def _at_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyMarkdown reads ./pyproject.toml, as ``make lint`` run from the root does."""
    monkeypatch.chdir(ROOT)


def _fet001_lines(text: str) -> list[int]:
    result = PyMarkdownApi().scan_string(text)
    return [f.line_number for f in result.scan_failures if f.rule_id == "FET001"]


def test_text_after_a_closing_fence_is_reported_on_its_line() -> None:
    assert _fet001_lines(UNCLOSED) == [6]


def test_the_same_block_closed_properly_passes() -> None:
    fixed = UNCLOSED.replace("``` `fetcher demo --keep`", "```\n\n`fetcher demo --keep`")
    assert _fet001_lines(fixed) == []


def test_an_info_string_cannot_close_a_block() -> None:
    text = "# T\n\n```sh\nls\n```console\n$ ls\n```\n"
    assert _fet001_lines(text) == [5]


def test_shorter_or_other_fences_inside_a_block_are_content() -> None:
    text = "# T\n\n````markdown\n```sh\nls\n```\n````\n\n~~~text\n```\n~~~\n"
    assert _fet001_lines(text) == []
