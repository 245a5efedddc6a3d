"""Who may address an HTTP process, and from which site (issue 33, docs/security.md).

Two browser attacks reach a service that listens on loopback or a private address:

* **DNS rebinding**: a page on ``http://rebind.example:4006`` whose name is made to resolve to
  127.0.0.1 runs under its own origin and reads and writes the API. Its requests carry
  ``Host: rebind.example:4006``. :class:`HostPolicy` accepts a ``Host`` only when it is

  - an IP address literal, any address, any port: a page's origin can be an IP literal only if
    the page came from that very address, so an IP literal cannot be rebound (this is what
    makes kubelet probes, which send the pod IP, work with no setting);
  - ``localhost`` or a name under ``.localhost`` (browsers resolve these to loopback
    themselves, never through DNS);
  - the host of ``SERVER_ADDRESS`` when it is a name;
  - a name of ``ALLOWED_HOSTS``: an exact name, ``.example.com`` (or ``*.example.com``) for
    that name and every name under it, or ``*`` for any ``Host`` at all (an explicit choice,
    never a default).

  Names compare case-insensitively, without the port and without one trailing dot. A request
  without ``Host`` (HTTP/1.0, never a browser) is accepted; a malformed one is refused.
  Anything refused → ``421 FET-0013`` before routing.
* **Cross-site writes**: with ``AUTH_MODE=none`` a browser on another site can still *send*
  ``POST``/``PUT``/``PATCH``/``DELETE`` (a ``no-cors`` form or fetch: the answer is opaque,
  the effect is not). :func:`cross_site_write` refuses such a request when
  ``Sec-Fetch-Site`` is ``cross-site`` or ``same-site`` (another port of ``localhost`` is the
  same *site*), or when ``Origin`` is present and names another host than ``Host`` (``null``
  included), unless the origin is one of ``CORS_ALLOWED_ORIGINS`` → ``403 FET-0014``. A
  request with neither header (curl, the SDK, a server) is not a browser's and passes.

Standard library only: both hosts (the Manager's middleware, the Worker's health server) use it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from fetcher.services.errors import ApiError

__all__ = [
    "CROSS_SITE_CODE",
    "CROSS_SITE_MESSAGE",
    "CROSS_SITE_TITLE",
    "MISDIRECTED_CODE",
    "MISDIRECTED_MESSAGE",
    "MISDIRECTED_TITLE",
    "REFUSED_HOST_LOG",
    "STATE_CHANGING_METHODS",
    "HostPolicy",
    "cross_site_refused",
    "cross_site_write",
    "host_refused",
]

MISDIRECTED_CODE = "FET-0013"
MISDIRECTED_TITLE = "Misdirected Request"
#: Never names the host: the caller chose it, and it may be anything.
MISDIRECTED_MESSAGE = (
    "The Host header names a host this service does not answer for (see ALLOWED_HOSTS)."
)
CROSS_SITE_CODE = "FET-0014"
CROSS_SITE_TITLE = "Cross-Site Request"
CROSS_SITE_MESSAGE = (
    "A state-changing request from another site is refused while AUTH_MODE is none."
)
#: The ``info`` line of each refused ``Host``: a refusal never reaches the access log.
REFUSED_HOST_LOG = "refused a request: its Host is not in ALLOWED_HOSTS (421 FET-0013)"
STATE_CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: A DNS name: letters, digits, ``-``, ``_`` and dots (no empty label), at most 253 characters.
_NAME = re.compile(r"(?=.{1,253}\Z)[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
_PORT = re.compile(r"[0-9]{1,5}")


def host_refused() -> ApiError:
    return ApiError(MISDIRECTED_CODE, MISDIRECTED_MESSAGE)


def cross_site_refused() -> ApiError:
    return ApiError(CROSS_SITE_CODE, CROSS_SITE_MESSAGE)


def _split_host(value: str) -> tuple[str, bool] | None:
    """``(host, is_ip_literal)`` of a ``Host`` value (``name[:port]``, ``v4[:port]``,
    ``[v6][:port]``), the name lower-cased without one trailing dot; ``None`` if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        inside, sep, rest = value[1:].partition("]")
        if not sep or (rest and not (rest[0] == ":" and _PORT.fullmatch(rest[1:]))):
            return None
        try:
            ipaddress.IPv6Address(inside)
        except ValueError:
            return None
        return inside, True
    host, sep, port = value.partition(":")
    if sep and not _PORT.fullmatch(port):
        return None
    try:
        ipaddress.IPv4Address(host)
        return host, True
    except ValueError:
        pass
    host = host[:-1] if host.endswith(".") else host
    return (host, False) if _NAME.fullmatch(host) else None


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The accepted ``Host`` names (module docstring); IP literals are always accepted."""

    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    any_host: bool = False

    @classmethod
    def build(cls, allowed_hosts: Iterable[str], server_host: str = "") -> HostPolicy:
        """From ``ALLOWED_HOSTS`` entries and the host of ``SERVER_ADDRESS`` (``""``: all
        interfaces, which adds no name)."""
        names = {"localhost"}
        suffixes = [".localhost"]
        any_host = False
        entries = [e.strip().lower() for e in allowed_hosts if e.strip()]
        if server_host and _split_host(server_host) is not None:
            entries.append(server_host.lower())
        for raw in entries:
            entry = raw.removeprefix("*") if raw.startswith("*.") else raw
            if entry == "*":
                any_host = True
            elif entry.startswith("."):
                suffixes.append(entry.rstrip("."))
                names.add(entry.strip("."))
            else:
                names.add(entry.rstrip("."))
        return cls(frozenset(names), tuple(suffixes), any_host)

    def allows(self, host: str | None) -> bool:
        """Whether a request with this ``Host`` header value (``None``: absent) is served."""
        if host is None or self.any_host:
            return True
        parsed = _split_host(host)
        if parsed is None:
            return False
        name, literal = parsed
        return literal or name in self.names or name.endswith(self.suffixes)


def _netloc(origin: str) -> str | None:
    """``host[:port]`` of an ``Origin`` value, lower-case; ``None`` for ``null`` or garbage."""
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return parts.netloc.lower()


def cross_site_write(
    *,
    method: str,
    host: str | None,
    origin: str | None,
    fetch_site: str | None,
    cors_allowed: bool,
) -> bool:
    """True when this state-changing request comes from another site (module docstring).

    ``cors_allowed``: the ``Origin`` is one ``CORS_ALLOWED_ORIGINS`` admits (the operator
    chose to let that site call the API).
    """
    if method.upper() not in STATE_CHANGING_METHODS or cors_allowed:
        return False
    if fetch_site is not None and fetch_site.strip().lower() in ("cross-site", "same-site"):
        return True
    if origin is None:
        return False
    own = (host or "").strip().lower()
    return _netloc(origin) != own or not own
