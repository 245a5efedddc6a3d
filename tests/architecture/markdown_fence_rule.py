"""FET001, a PyMarkdown rule that ``make lint`` loads (``plugins.additional_paths`` in
pyproject.toml; PyMarkdown wants the class named after the file): no fenced code block holds a
line that looks like its own fence.

A closing fence is only the fence characters, optionally followed by spaces (CommonMark §4.5).
A line of three backticks followed by text (the README's "``` `fetcher demo --keep` leaves…")
or by an info string ("```console") inside a block therefore does *not* close it: the block
runs on, and the prose, headings and tables after it render as code. PyMarkdown's own rules
accept such a file, so this rule reports the first line inside a block that starts with at
least as many of the block's fence characters as opened it: the line meant as a fence.
"""

from __future__ import annotations

from typing import cast

from pymarkdown.plugin_manager.plugin_details import PluginDetails
from pymarkdown.plugin_manager.plugin_scan_context import PluginScanContext
from pymarkdown.plugin_manager.rule_plugin import RulePlugin
from pymarkdown.tokens.fenced_code_block_markdown_token import FencedCodeBlockMarkdownToken
from pymarkdown.tokens.markdown_token import MarkdownToken
from pymarkdown.tokens.text_markdown_token import TextMarkdownToken

RULE_ID = "FET001"


class MarkdownFenceRule(RulePlugin):
    """Reports a fence-looking line inside a fenced code block, once per block."""

    def __init__(self) -> None:
        super().__init__()
        self._open: FencedCodeBlockMarkdownToken | None = None

    def get_details(self) -> PluginDetails:
        return PluginDetails(
            plugin_name="fence-inside-code",
            plugin_id=RULE_ID,
            plugin_enabled_by_default=True,
            plugin_description="A line inside a fenced code block looks like a fence "
            "(a closing fence takes nothing after its backticks)",
            plugin_version="0.1.0",
            plugin_interface_version=1,
        )

    def starting_new_file(self) -> None:
        self._open = None

    def next_token(self, context: PluginScanContext, token: MarkdownToken) -> None:
        if token.is_fenced_code_block:
            self._open = cast(FencedCodeBlockMarkdownToken, token)
        elif token.is_fenced_code_block_end:
            self._open = None
        elif self._open is not None and token.is_text:
            self._check_text(context, cast(TextMarkdownToken, token), self._open)

    def _check_text(
        self,
        context: PluginScanContext,
        text: TextMarkdownToken,
        fence: FencedCodeBlockMarkdownToken,
    ) -> None:
        marker = fence.fence_character * fence.fence_count
        for offset, line in enumerate(text.token_text.split("\n")):
            if line.lstrip(" ").startswith(marker):
                self.report_next_token_error(
                    context,
                    text,
                    extra_error_information=f"the block opened on line {fence.line_number} "
                    "is still open here",
                    line_number_delta=offset,
                )
                self._open = None  # one report per block is enough to find the fence
                return
