"""Error-text redaction (CONTRACT §8.7) and URL userinfo masking (§9.2).

:class:`Redactor` applies the eleven §8.7 steps in order, each replacing with ``[redacted]``:

1. Known values: every literal occurrence of each known secret (case-sensitive) and each known
   host or resolved IP (case-insensitive, together with an immediately following ``:<digits>``).
   Values shorter than 4 characters are skipped. All occurrences are located in the input
   first and overlapping spans are merged, so the longest value wins and no fragment of a
   shorter overlapping one survives. An unscoped IPv6 host also absorbs a following ``%zone``.
2. URIs. 3. Userinfo without a scheme. 4. ``password``/``passwd``/``pwd`` key/value (never
   ``YES``/``NO``). 5. MongoDB ``Addr:``. 6. The address after a network verb. 7. Bracketed
   IPv6. 8. IPv4. 9. ``hostname:port``. 10. Python address tuples. 11. Bare IPv6 tokens.

Bounds (§8.7, §13 "Redaction cost"): step 1 runs on the whole text, the result is cut to its
first :data:`MAX_PATTERN_INPUT` code points, and steps 2 to 11 run on that. Every step runs in
time linear in its input: steps 4 to 8 and 10 are the table's regexes with possessive
quantifiers where a give-back can never lead to a match (so the match set is unchanged), each
anchored at a rare literal; steps 2, 3 and 9, whose table regexes retry a long run from every
word boundary inside it, are small scanners that start from their ``:`` anchor and look back
once. Each produces exactly the matches of the §8.7 regex (leftmost, non-overlapping).
Everything else survives unchanged.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
from collections.abc import Callable, Iterable

__all__ = [
    "INLINE_LIMIT",
    "LOG_REDACTED",
    "MAX_PATTERN_INPUT",
    "REDACTED",
    "Redactor",
    "redact",
    "redact_url",
]

REDACTED = "[redacted]"
#: §8.7: steps 2 to 11 see at most this many code points (the text after step 1, cut).
MAX_PATTERN_INPUT = 4096
#: :meth:`Redactor.redact_async` redacts longer texts in a worker thread (§13 "Blocking work").
INLINE_LIMIT = 1024
#: ``extra`` for a log call whose variable parts were redacted where they were produced: the
#: log formatter then does not redact the message again (§8.7: one text is redacted once).
LOG_REDACTED = {"redacted": True}
_MIN_LITERAL = 4
_MAX_PASSES = 4
#: A redaction marker that no step may match: ten private-use code points, the length of
#: ``[redacted]``, so the 4,096-code-point cut falls where it would on the marker.
_INERT = "\ue000" * len(REDACTED)

#: A step-1 value: its pattern, its length, and whether ``finditer`` finds every occurrence.
_Literal = tuple[re.Pattern[str], int, bool]
#: A match: (start, end, replacement).
_Hit = tuple[int, int, str]
_Finder = Callable[[str, int], "_Hit | None"]


def _is_word(ch: str) -> bool:
    """``\\w`` of Python ``re`` on ``str`` patterns: Unicode alphanumerics and ``_``."""
    return ch.isalnum() or ch == "_"


def _boundary(text: str, i: int) -> bool:
    """``\\b`` at index ``i`` (the ends of the text count as non-word)."""
    before = i > 0 and _is_word(text[i - 1])
    after = i < len(text) and _is_word(text[i])
    return before != after


def _run_start(text: str, end: int, floor: int, chars: frozenset[str]) -> int:
    """The start of the run of ``chars`` that ends at ``end``, not below ``floor``."""
    start = end
    while start > floor and text[start - 1] in chars:
        start -= 1
    return start


def _substitute(text: str, find: _Finder) -> str:
    """``re.sub`` semantics for a finder: leftmost, non-overlapping, left to right."""
    out: list[str] = []
    last = 0
    while (hit := find(text, last)) is not None:
        start, end, replacement = hit
        out.append(text[last:start])
        out.append(replacement)
        last = end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


# --- step 2: \b[A-Za-z][A-Za-z0-9+.\-]*://\S+ --------------------------------------------

_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ASCII_ALNUM = _ASCII_LETTERS | frozenset("0123456789")
_SCHEME_CHARS = _ASCII_ALNUM | frozenset("+.-")
_NON_SPACE = re.compile(r"\S++")


def _find_uri(text: str, pos: int) -> _Hit | None:
    """Step 2. The scheme run cannot hold ``:``, so every start the regex could take before
    one ``://`` ends its scheme exactly there: look back from each ``://`` once."""
    while (sep := text.find("://", pos)) >= 0:
        if sep + 3 < len(text) and not text[sep + 3].isspace():  # \S+ needs one character
            first = _run_start(text, sep, pos, _SCHEME_CHARS)
            for start in range(first, sep):
                if text[start] in _ASCII_LETTERS and _boundary(text, start):
                    return start, _run_end(_NON_SPACE, text, sep + 3), REDACTED
        pos = sep + 1
    return None


# --- step 3: \b[^\s:/@'"]+:[^\s/@'"]+@[^\s/'"]+ -------------------------------------------

_USER_EXCLUDED = frozenset(":/@'\"")
_PASS_RUN = re.compile(r"""[^\s/@'"]*+""")
_HOST_RUN = re.compile(r"""[^\s/'"]*+""")


def _run_end(run: re.Pattern[str], text: str, pos: int) -> int:
    """Where the (possibly empty) run ``run`` that starts at ``pos`` ends."""
    match = run.match(text, pos)
    return match.end() if match else pos


def _user_start(text: str, colon: int, pos: int) -> int | None:
    """The leftmost start of ``\\b[^\\s:/@'"]+`` that ends at ``colon``, or ``None``."""
    start = colon
    while start > pos and not text[start - 1].isspace() and text[start - 1] not in _USER_EXCLUDED:
        start -= 1
    return next((i for i in range(start, colon) if _boundary(text, i)), None)


def _find_userinfo(text: str, pos: int) -> _Hit | None:
    """Step 3, anchored at each ``:``. The user part holds no ``:`` and the password part no
    ``@``, so a colon fixes where both end; a colon inside a failed password part fails the
    same way and is skipped."""
    at = -1
    while (colon := text.find(":", pos)) >= 0:
        if colon >= at:  # colons inside one password part share its end: scan it once
            at = _run_end(_PASS_RUN, text, colon + 1)
        if at == colon + 1 or at >= len(text) or text[at] != "@":
            pos = max(at, colon + 1)
            continue
        start = _user_start(text, colon, pos)  # before the host run: it may be long
        if start is None:
            pos = colon + 1
            continue
        host_end = _run_end(_HOST_RUN, text, at + 1)
        if host_end == at + 1:
            pos = at
            continue
        return start, host_end, REDACTED
    return None


# --- step 9: hostname:port ------------------------------------------------------------------

_HOST_CHARS = _ASCII_ALNUM | frozenset(".-")
_PORT = re.compile(r"\d{1,5}\b")


def _host_start(text: str, colon: int, pos: int) -> int | None:
    """The leftmost start of a §8.7 step-9 host that ends at ``colon``, or ``None``.

    ``label(.label)*`` with labels ``[A-Za-z0-9]`` at both ends and ``-`` inside holds no
    ``:``, so it ends at ``colon``. A suffix of the run before it is such a host when it starts
    alphanumeric, the run ends alphanumeric, and no ``..``, ``.-`` or ``-.`` follows its start;
    the lookahead wants a letter in it and ``\\b`` must hold at its start. One backward scan.
    """
    if colon == 0 or text[colon - 1] not in _ASCII_ALNUM:
        return None
    best = None
    letter = False
    i = colon - 1
    while i >= pos and text[i] in _HOST_CHARS:
        ch = text[i]
        if ch in _ASCII_LETTERS:
            letter = True
        elif ch in ".-" and text[i + 1] in ".-" and ch + text[i + 1] != "--":
            break  # "..", ".-" or "-.": no host starts at or before i
        if letter and ch in _ASCII_ALNUM and _boundary(text, i):
            best = i
        i -= 1
    return best


def _find_host_port(text: str, pos: int) -> _Hit | None:
    """Step 9, anchored at each ``:`` followed by a 1-5 digit port and a word boundary."""
    while (colon := text.find(":", pos)) >= 0:
        port = _PORT.match(text, colon + 1)
        if port is not None:
            start = _host_start(text, colon, pos)
            if start is not None:
                return start, port.end(), REDACTED
        pos = colon + 1
    return None


def _regex_finder(pattern: re.Pattern[str], template: str) -> _Finder:
    """A finder for ``pattern`` whose replacement is ``template``: a literal, or ``\\1``
    followed by a literal (``match.expand`` would parse the template on every match)."""
    group = template.startswith("\\1")
    literal = template[2:] if group else template

    def find(text: str, pos: int) -> _Hit | None:
        match = pattern.search(text, pos)
        if match is None:
            return None
        replacement = match.group(1) + literal if group else literal
        return match.start(), match.end(), replacement

    return find


# Steps 4-8 and 10: the §8.7 regexes, with possessive quantifiers only where giving characters
# back can never produce a match (the next token cannot match what was given back).
_STEP4 = re.compile(
    r"""(?i)\b(password|passwd|pwd)\s*+[=:]\s*+(?!(?:YES|NO)\b)("[^"]*+"|'[^']*+'|[^\s;,&)]++)"""
)
_STEP5 = re.compile(r"Addr:\s*+\S++")
_STEP6 = re.compile(
    r"(?i)\b(connection to server at|connection to server on|connect to|connecting to"
    r"|connection to|server on|dial tcp|dial udp|read tcp|write tcp|lookup|host name"
    r"|at host|host|server)\s++"
    r"""("[^"]*+"|'[^']*+'|\[[^\]\s]*+\]\S*+|(?=\S*(?:\d|[.:][A-Za-z0-9]))\S++)"""
)
# The table's \[H*:H*\] retries every split of a colon run; "a colon in the run" is the same.
_STEP7 = re.compile(r"\[(?=[0-9A-Fa-f.]*+:)[0-9A-Fa-f:.]*+\](?::\d++)?")
_STEP8 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")
_STEP10 = re.compile(r"\(\s*+'[^']*+'\s*+,\s*+\d{1,5}+\s*+\)")

_STEPS: tuple[_Finder, ...] = (
    _find_uri,
    _find_userinfo,
    _regex_finder(_STEP4, r"\1=[redacted]"),
    _regex_finder(_STEP5, "Addr: [redacted]"),
    _regex_finder(_STEP6, r"\1 [redacted]"),
    _regex_finder(_STEP7, REDACTED),
    _regex_finder(_STEP8, REDACTED),
    _find_host_port,
    _regex_finder(_STEP10, "([redacted])"),
)

_TOKEN = re.compile(r"\S++")
_WRAPPERS = "()[]{}<>,;'\""


def _redact_ipv6_token(match: re.Match[str]) -> str:
    """Step 11: a token whose core (wrappers and an optional ``%zone`` stripped) is IPv6."""
    token = match.group(0)
    if ":" not in token:
        return token
    core = token.strip(_WRAPPERS)
    if not core or ":" not in core:
        return token
    address = core.split("%", 1)[0]
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return token
    start = len(token) - len(token.lstrip(_WRAPPERS))
    return token[:start] + REDACTED + token[start + len(core) :]


def _one_pass(text: str) -> str:
    """§8.7 steps 2 to 11, in order, each linear in ``len(text)``."""
    for find in _STEPS:
        text = _substitute(text, find)
    return _TOKEN.sub(_redact_ipv6_token, text)


def _pattern_steps(text: str) -> str:
    """Steps 2 to 11, then again over the result until nothing changes (bounded passes).

    Redacting twice must change nothing, and one pass of the table is not always a fixed
    point: a ``[redacted]`` followed by more text is a step-6 operand (``server at
    [redacted],`` would lose its comma), and a replacement can join what whitespace separated
    (a step-10 tuple spanning a newline). So a ``[redacted]`` that was in the text before steps
    2-11 (an earlier layer's or pass's output) is inert: it is masked by :data:`_INERT`, a
    same-length run no step matches or extends over, and restored at the end. Step-1 markers
    stay visible to the first pass, as the §8.7 examples require (``dial tcp [redacted]:``).
    """
    text = _one_pass(text)
    for _ in range(_MAX_PASSES - 1):
        masked = text.replace(REDACTED, _INERT)
        out = _one_pass(masked)
        if out == masked:
            break
        text = out.replace(_INERT, REDACTED)
    return text.replace(_INERT, REDACTED)


def _literal_patterns(secrets: Iterable[str], hosts: Iterable[str]) -> tuple[_Literal, ...]:
    """Step-1 patterns, longest value first: secrets literal, hosts case-insensitive + port."""
    entries: dict[tuple[str, bool], None] = {}
    for value in secrets:
        if value and len(value) >= _MIN_LITERAL:
            entries[(value, False)] = None
    for value in hosts:
        if value and len(value) >= _MIN_LITERAL:
            entries[(value, True)] = None
    ordered = sorted(entries, key=lambda item: -len(item[0]))
    return tuple(
        (_value_pattern(value, is_host), len(value), _chains_cover_overlaps(value, is_host))
        for value, is_host in ordered
    )


def _periods(value: str) -> list[int]:
    """Every period of ``value`` shorter than it, smallest first (its borders, longest first)."""
    border = [0] * len(value)
    k = 0
    for i in range(1, len(value)):
        while k and value[i] != value[k]:
            k = border[k - 1]
        if value[i] == value[k]:
            k += 1
        border[i] = k
    periods = []
    k = border[-1] if value else 0
    while k:
        periods.append(len(value) - k)
        k = border[k - 1]
    return periods


def _value_pattern(value: str, is_host: bool) -> re.Pattern[str]:
    """One step-1 value as a pattern whose group 1 is a chain of overlapping occurrences.

    A value that overlaps itself (``ssss``) occurs at every shift by its period inside a run;
    the chain ``value(tail)*`` takes such a run in one match instead of one per position.
    A host is matched case-insensitively, with an immediately following ``:<digits>``; an
    unscoped IPv6 host also takes an immediately following ``%zone``, so that a known
    ``fe80::1`` redacts ``fe80::1%eth0`` whole, as the §8.7 examples require. The tails are
    possessive: nothing follows them in the pattern, so giving back never helps.
    """
    key = value.lower() if is_host else value
    period = next(iter(_periods(key)), len(value))
    chain = re.escape(value)
    if period < len(value):
        chain += f"(?:{re.escape(value[len(value) - period :])})*+"
    if not is_host:
        return re.compile(f"({chain})")
    zone = "(?:%[0-9A-Za-z_.\\-]++)?" if _is_ipv6(value) and "%" not in value else ""
    return re.compile(f"(?i:({chain})){zone}(?::[0-9]++)?")


def _is_ipv6(value: str) -> bool:
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


def _chains_cover_overlaps(value: str, is_host: bool) -> bool:
    """Whether non-overlapping chain matches (``finditer``) find every occurrence of a secret.

    An occurrence can overlap another only by a shift that is a period of the value; when every
    period is a multiple of the smallest, the chain takes all of them. (A host is searched
    carefully: an occurrence may also start inside the port or zone of the one before.)
    """
    periods = _periods(value)
    return not is_host and all(q % periods[0] == 0 for q in periods)


def _occurrences(literal: _Literal, text: str, spans: list[tuple[int, int]]) -> None:
    """Append the spans of every (possibly overlapping) occurrence of a step-1 value.

    After a chain ending at ``e`` the careful search goes on at ``e - size + 1`` (``size`` is
    the value's length): an occurrence starting earlier lies inside the chain. Overlapping
    spans are merged later.
    """
    pattern, size, chains_suffice = literal
    if chains_suffice:
        spans.extend(m.span() for m in pattern.finditer(text))
        return
    pos = 0
    while (m := pattern.search(text, pos)) is not None:
        spans.append(m.span())
        pos = max(m.start() + 1, m.end(1) - size + 1)


def _merge(spans: list[tuple[int, int]]) -> list[list[int]]:
    spans.sort()
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


class Redactor:
    """A §8.7 redactor that knows a fixed set of secret values and hosts (step 1).

    Instances are immutable; :meth:`with_values` returns an extended copy. The repr never shows
    the known values.
    """

    __slots__ = ("_hosts", "_literals", "_secrets")

    def __init__(self, secrets: Iterable[str] = (), hosts: Iterable[str] = ()) -> None:
        self._secrets: tuple[str, ...] = tuple(v for v in secrets if v)
        self._hosts: tuple[str, ...] = tuple(v for v in hosts if v)
        self._literals = _literal_patterns(self._secrets, self._hosts)

    def with_values(self, secrets: Iterable[str] = (), hosts: Iterable[str] = ()) -> Redactor:
        """A new redactor that also knows ``secrets`` and ``hosts``."""
        return Redactor((*self._secrets, *secrets), (*self._hosts, *hosts))

    def redact_known(self, text: str) -> str:
        """§8.7 step 1 alone, on the whole text: every occurrence (overlaps included) of every
        known secret and host, and nothing else (no pattern step, no cut). For a driver's error
        detail kept for operators, where addresses stay readable; :meth:`redact` runs where
        the text is shown."""
        if not self._literals:
            return text
        spans: list[tuple[int, int]] = []
        for literal in self._literals:
            _occurrences(literal, text, spans)
        if not spans:
            return text
        out: list[str] = []
        last = 0
        for start, end in _merge(spans):
            out.append(text[last:start])
            out.append(REDACTED)
            last = end
        out.append(text[last:])
        return "".join(out)

    def redact(self, text: str) -> str:
        """§8.7: step 1 on ``text``, the cut to 4,096 code points, then steps 2 to 11.

        A ``[redacted]`` already in ``text`` is an earlier redaction's output and is inert.
        """
        text = self.redact_known(text.replace(REDACTED, _INERT))
        return _pattern_steps(text[:MAX_PATTERN_INPUT])

    async def redact_async(self, text: str) -> str:
        """:meth:`redact` from async code: a text longer than :data:`INLINE_LIMIT` is redacted
        in a worker thread, so untrusted text never holds the event loop (§13 "Blocking
        work"); a short one inline, where a thread hop would cost more than the work."""
        if len(text) <= INLINE_LIMIT:
            return self.redact(text)
        return await asyncio.to_thread(self.redact, text)

    def __call__(self, text: str) -> str:
        return self.redact(text)

    def __repr__(self) -> str:
        return f"Redactor(<{len(self._secrets)} secrets>, <{len(self._hosts)} hosts>)"


_DEFAULT = Redactor()


def redact(text: str) -> str:
    """§8.7 redaction without known values (steps 2 to 11 only)."""
    return _DEFAULT.redact(text)


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def redact_url(url: str) -> str:
    """Replace a URL's userinfo with ``[redacted]`` (§9.2); other parts are kept verbatim.

    The userinfo ends at the last ``@`` of the authority. When a malformed URL carries an
    unescaped ``/``, ``?`` or ``#`` inside its password (so the authority seems to have no
    ``@``), everything up to the last ``@`` is masked if a ``:`` precedes it, erring towards
    hiding the secret.
    """
    scheme = _SCHEME.match(url)
    head = scheme.group(0) if scheme else ""
    rest = url[len(head) :]
    authority_end = next((i for i, ch in enumerate(rest) if ch in "/?#"), len(rest))
    at = rest.rfind("@", 0, authority_end)
    if at < 0:
        last = rest.rfind("@")
        if last < 0 or ":" not in rest[:last]:
            return url
        at = last
    return head + REDACTED + rest[at:]
