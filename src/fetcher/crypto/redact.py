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

Steps 2 to 10 use the §8.7 table's Python regexes verbatim. Everything else survives unchanged.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

__all__ = ["REDACTED", "Redactor", "redact", "redact_url"]

REDACTED = "[redacted]"
_MIN_LITERAL = 4

_STEPS: tuple[tuple[re.Pattern[str], str], ...] = (
    # 2. URIs
    (re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://\S+"), REDACTED),
    # 3. Userinfo without a scheme
    (re.compile(r"""\b[^\s:/@'"]+:[^\s/@'"]+@[^\s/'"]+"""), REDACTED),
    # 4. Password key/value
    (
        re.compile(
            r"""(?i)\b(password|passwd|pwd)\s*[=:]\s*(?!(?:YES|NO)\b)("[^"]*"|'[^']*'|[^\s;,&)]+)"""
        ),
        r"\1=[redacted]",
    ),
    # 5. MongoDB Addr:
    (re.compile(r"Addr:\s*\S+"), "Addr: [redacted]"),
    # 6. Address after a network verb
    (
        re.compile(
            r"(?i)\b(connection to server at|connection to server on|connect to|connecting to"
            r"|connection to|server on|dial tcp|dial udp|read tcp|write tcp|lookup|host name"
            r"|at host|host|server)\s+"
            r"""("[^"]*"|'[^']*'|\[[^\]\s]*\]\S*|(?=\S*(?:\d|[.:][A-Za-z0-9]))\S+)"""
        ),
        r"\1 [redacted]",
    ),
    # 7. Bracketed IPv6 (optional port)
    (re.compile(r"\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\](?::\d+)?"), REDACTED),
    # 8. IPv4 (optional port)
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), REDACTED),
    # 9. Hostname:port
    (
        re.compile(
            r"\b(?=[A-Za-z0-9.\-]*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
            r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*:\d{1,5}\b"
        ),
        REDACTED,
    ),
    # 10. Python address tuple
    (re.compile(r"\(\s*'[^']*'\s*,\s*\d{1,5}\s*\)"), "([redacted])"),
)

_TOKEN = re.compile(r"\S+")
_ZONE = r"(?:%[0-9A-Za-z_.\-]+)?"
_WRAPPERS = "()[]{}<>,;'\""


def _redact_ipv6_token(match: re.Match[str]) -> str:
    """Step 11: a token whose core (wrappers and an optional ``%zone`` stripped) is IPv6."""
    token = match.group(0)
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


def _literal_patterns(secrets: Iterable[str], hosts: Iterable[str]) -> tuple[re.Pattern[str], ...]:
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
        re.compile(_host_pattern(value)) if is_host else re.compile(re.escape(value))
        for value, is_host in ordered
    )


def _is_ipv6(value: str) -> bool:
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


def _host_pattern(host: str) -> str:
    """A host or IP, case-insensitive, with an immediately following ``:<digits>``.

    An unscoped IPv6 literal also takes an immediately following ``%zone``, so that a known
    ``fe80::1`` redacts ``fe80::1%eth0`` whole, as the §8.7 examples require.
    """
    zone = _ZONE if _is_ipv6(host) and "%" not in host else ""
    return f"(?i:{re.escape(host)}){zone}(?::[0-9]+)?"


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

    def _redact_literals(self, text: str) -> str:
        spans: list[tuple[int, int]] = []
        for pattern in self._literals:
            pos = 0
            while (m := pattern.search(text, pos)) is not None:
                spans.append((m.start(), m.end()))
                pos = m.start() + 1
        if not spans:
            return text
        spans.sort()
        merged: list[list[int]] = []
        for start, end in spans:
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        out: list[str] = []
        last = 0
        for start, end in merged:
            out.append(text[last:start])
            out.append(REDACTED)
            last = end
        out.append(text[last:])
        return "".join(out)

    def redact(self, text: str) -> str:
        """Apply §8.7 steps 1 to 11, in order, to ``text``."""
        text = self._redact_literals(text)
        for pattern, replacement in _STEPS:
            text = pattern.sub(replacement, text)
        return _TOKEN.sub(_redact_ipv6_token, text)

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
