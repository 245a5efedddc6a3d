"""Connection use cases (contract §2.5, §2.6, §2.7, §2.9, §9.4), one service per use case.

* :class:`~fetcher.services.connections.catalog.ConnectionCatalog`: get and the two lists.
* :class:`~fetcher.services.connections.editor.ConnectionEditor`: create, PATCH, soft DELETE,
  assign.
* :class:`~fetcher.services.connections.tester.ConnectionTester`: the rate-limited live test,
  and the live test of job creation.
* :class:`~fetcher.services.connections.schema_inspection.SchemaInspector`: fresh schema discovery
  and
  validate-schema (through the §2.7 cache).

They share a :class:`~fetcher.services.connections.directory.ConnectionDirectory` (which
connections a caller reaches, §12.4, §12.5) and a
:class:`~fetcher.services.connections.dialer.ConnectionDialer` (SSRF pre-dial, decryption in
memory for one use, §6.4, and the redacted failure log). Every use case takes the request's
:class:`~fetcher.services.principal.Principal`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fetcher.services.connections.catalog import ConnectionCatalog
from fetcher.services.connections.directory import ConnectionDirectory
from fetcher.services.connections.editor import ConnectionEditor
from fetcher.services.connections.schema_inspection import SchemaInspector
from fetcher.services.connections.tester import ConnectionTester

__all__ = ["ConnectionServices"]


@dataclass(frozen=True, slots=True)
class ConnectionServices:
    """The connection services of one runtime, built together by the composition root."""

    directory: ConnectionDirectory
    catalog: ConnectionCatalog
    editor: ConnectionEditor
    tester: ConnectionTester
    schemas: SchemaInspector
