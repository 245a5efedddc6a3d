"""Properties of the §8.7 redactor (hypothesis).

* Each rewritten step finds exactly the matches of the §8.7 table's regex (the oracle below is
  the table, verbatim), on texts short enough for the table's regexes to be quick.
* No step-1 value ever survives; the output is bounded; redacting twice changes nothing.
"""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from fetcher.crypto import REDACTED, Redactor
from fetcher.crypto.redact import (
    _STEP4,
    _STEP5,
    _STEP6,
    _STEP7,
    _STEP8,
    _STEP10,
    MAX_PATTERN_INPUT,
    _find_host_port,
    _find_uri,
    _find_userinfo,
    _regex_finder,
    _substitute,
)

# The §8.7 table, verbatim: the oracle for steps 2 to 10.
TABLE = {
    2: (r"\b[A-Za-z][A-Za-z0-9+.\-]*://\S+", REDACTED),
    3: (r"""\b[^\s:/@'"]+:[^\s/@'"]+@[^\s/'"]+""", REDACTED),
    4: (
        r"""(?i)\b(password|passwd|pwd)\s*[=:]\s*(?!(?:YES|NO)\b)("[^"]*"|'[^']*'|[^\s;,&)]+)""",
        r"\1=[redacted]",
    ),
    5: (r"Addr:\s*\S+", "Addr: [redacted]"),
    6: (
        r"(?i)\b(connection to server at|connection to server on|connect to|connecting to"
        r"|connection to|server on|dial tcp|dial udp|read tcp|write tcp|lookup|host name"
        r"|at host|host|server)\s+"
        r"""("[^"]*"|'[^']*'|\[[^\]\s]*\]\S*|(?=\S*(?:\d|[.:][A-Za-z0-9]))\S+)""",
        r"\1 [redacted]",
    ),
    7: (r"\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\](?::\d+)?", REDACTED),
    8: (r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", REDACTED),
    9: (
        r"\b(?=[A-Za-z0-9.\-]*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*:\d{1,5}\b",
        REDACTED,
    ),
    10: (r"\(\s*'[^']*'\s*,\s*\d{1,5}\s*\)", "([redacted])"),
}

REWRITTEN = {
    2: _find_uri,
    3: _find_userinfo,
    4: _regex_finder(_STEP4, r"\1=[redacted]"),
    5: _regex_finder(_STEP5, "Addr: [redacted]"),
    6: _regex_finder(_STEP6, r"\1 [redacted]"),
    7: _regex_finder(_STEP7, REDACTED),
    8: _regex_finder(_STEP8, REDACTED),
    9: _find_host_port,
    10: _regex_finder(_STEP10, "([redacted])"),
}

# Characters and fragments the steps care about, so random texts hit the edge cases.
_ATOMS = st.sampled_from(
    [
        *"aZx09_.-:/@'\"[]()%,;=& \t\né٣",
        "://",
        "a.",
        "a:1",
        "x@y:z@",
        "Addr:",
        "host ",
        "server on ",
        "connection to server at ",
        "lookup ",
        "password",
        "PWD",
        "YES",
        "no",
        "12345",
        "123456",
        "10.0.0.5",
        "fe80::1",
        "::",
        "db-1",
        "('",
        "', 5432)",
        REDACTED,
    ]
)
TEXT = st.lists(_ATOMS, max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(TEXT)
@example("a.b.c:80 and a..b:1 -a.b:2 a-.b:3 _a.b:4 9.9:5 x.9:6")
@example("u:p@h u::p@h :p@h u:@h u:p@ 'u:p@h' a:b:c@d@e")
@example("s+a.b-c://x 1a://x _a://x ://x a:// b://c://d")
def test_rewritten_steps_match_the_table(text: str) -> None:
    for step, (pattern, replacement) in TABLE.items():
        expected = re.sub(pattern, replacement, text)
        assert _substitute(text, REWRITTEN[step]) == expected, step


SECRET = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_characters="[] =\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0"
    ),
    min_size=4,
    max_size=12,
).filter(lambda s: s not in REDACTED and not any(c.isspace() for c in s))
HOST = st.from_regex(r"[a-z0-9][a-z0-9.\-]{3,12}", fullmatch=True)


@st.composite
def secret_texts(draw: st.DrawFn) -> tuple[list[str], list[str], str]:
    """Known secrets and hosts, and a text that embeds them among hostile fragments."""
    secrets = draw(st.lists(SECRET, min_size=1, max_size=3))
    hosts = draw(st.lists(HOST, max_size=2))
    pieces = draw(st.lists(st.one_of(_ATOMS, st.sampled_from(secrets + hosts), TEXT), max_size=30))
    return secrets, hosts, "".join(pieces)


@settings(max_examples=300, deadline=None)
@given(secret_texts())
def test_no_step1_value_survives_and_twice_changes_nothing(
    case: tuple[list[str], list[str], str],
) -> None:
    # Generated secrets hold no `[`, `]`, `=` or whitespace: the redactor writes those itself
    # (`[redacted]`, `pwd=`, `host `), so such a secret could be formed anew by the output.
    secrets, hosts, text = case
    redactor = Redactor(secrets=secrets, hosts=hosts)
    once = redactor.redact(text)
    for value in secrets:
        assert value not in once
    for host in hosts:
        assert host.lower() not in once.lower()
    assert redactor.redact(once) == once


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_redacting_twice_changes_nothing(text: str) -> None:
    once = Redactor().redact(text)
    assert Redactor().redact(once) == once


@settings(max_examples=50, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=5), st.integers(1, 400))
def test_output_is_bounded(parts: list[str], repeat: int) -> None:
    # Steps 2-11 see at most 4,096 code points; each replacement at most triples-and-a-bit a
    # match (`::` plus a separator, 3 code points, becomes 11), so the output stays bounded
    # however long the input is.
    text = "".join(parts) * repeat
    out = Redactor(secrets=["abcd"]).redact(text)
    assert len(out) <= 4 * MAX_PATTERN_INPUT


def test_the_cut_comes_after_step_1() -> None:
    secret = "s3cr3t-value"
    text = "x" * (MAX_PATTERN_INPUT - 4) + secret + " 10.0.0.5"
    out = Redactor(secrets=[secret]).redact(text)
    # Step 1 saw the whole text, so the secret straddling the cut is gone entirely; the IP
    # beyond the cut is not in the output at all.
    assert "s3cr" not in out
    assert out == "x" * (MAX_PATTERN_INPUT - 4) + REDACTED[:4]


def _naive_step1(values: list[str], hosts: list[str], text: str) -> str:
    """Step 1 by brute force: a span per occurrence at every position, overlaps merged."""
    spans = []
    lowered = text.lower()
    for i in range(len(text)):
        for value in (v for v in values if len(v) >= 4):
            if text.startswith(value, i):
                spans.append((i, i + len(value)))
        for host in (h for h in hosts if len(h) >= 4):
            if lowered.startswith(host.lower(), i):
                port = re.match(r":[0-9]+", text[i + len(host) :])
                spans.append((i, i + len(host) + (port.end() if port else 0)))
    merged: list[list[int]] = []
    for start, stop in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    out, last = [], 0
    for start, stop in merged:
        out += [text[last:start], REDACTED]
        last = stop
    out.append(text[last:])
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text("ab", min_size=4, max_size=6), min_size=1, max_size=2),
    st.lists(st.text("aB1:", min_size=4, max_size=5), max_size=2),
    st.text("abB1: ", max_size=40),
)
@example(["aabaa"], [], "aabaaabaa aabaabaa aabaaaabaa")
@example([], ["1234"], "1234:1234:99")
def test_step1_finds_every_overlapping_occurrence(
    values: list[str], hosts: list[str], text: str
) -> None:
    # Step 1 alone: a text with no address shape for steps 2-11 (letters, `1`, `:` and spaces
    # can form `b:1`, so compare only the literal step).
    assert Redactor(values, hosts).redact_known(text) == _naive_step1(values, hosts, text)
