"""§13 "Client certificates": a PostgreSQL connection without ``ssl.cert`` never offers a
client certificate, not even one the service's own environment would make libpq send
(``~/.postgresql/postgresql.crt``, ``PGSSLCERT``).

The server is a small fake on loopback: it accepts the SSLRequest, runs a TLS handshake that
asks for a client certificate (``CERT_OPTIONAL``) and records what the client presented.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import ssl
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fetcher.adapters.sql.postgres import PostgresConnector
from fetcher.engine.errors import EngineError
from fetcher.engine.model import ConnectionDescriptor, TlsSettings
from fetcher.engine.types import EngineType

pytestmark = pytest.mark.integration

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104


def self_signed(common_name: str) -> tuple[str, str]:
    """A self-signed CA-capable certificate and its key, both PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return cert_pem, key_pem


def private_file(path: Path, text: str) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    return str(path)


@dataclass
class FakeTlsServer:
    """Records, per TLS handshake, the client certificate presented (``None``: none)."""

    context: ssl.SSLContext
    presented: list[bytes | None] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                _length, code = struct.unpack(">ii", await reader.readexactly(8))
                if code == GSSENC_REQUEST:
                    writer.write(b"N")
                    continue
                if code != SSL_REQUEST:
                    return
                writer.write(b"S")
                await writer.drain()
                await writer.start_tls(self.context)
                tls = writer.get_extra_info("ssl_object")
                self.presented.append(tls.getpeercert(binary_form=True))
                return
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            return
        finally:
            writer.close()


@dataclass
class Setup:
    server: FakeTlsServer
    client_cert: str
    client_key: str
    cert_file: str
    key_file: str


@pytest_asyncio.fixture
async def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Setup]:
    server_cert, server_key = self_signed("db.test")
    client_cert, client_key = self_signed("fetcher-service")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(
        private_file(tmp_path / "server.crt", server_cert),
        private_file(tmp_path / "server.key", server_key),
    )
    context.verify_mode = ssl.CERT_OPTIONAL  # ask for a client certificate
    context.load_verify_locations(cadata=client_cert)
    fake = FakeTlsServer(context)
    listener = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = listener.sockets[0].getsockname()[1]
    # The service's own certificate, where libpq looks for it by default.
    home = tmp_path / "home"
    (home / ".postgresql").mkdir(parents=True)
    cert_file = private_file(home / ".postgresql" / "postgresql.crt", client_cert)
    key_file = private_file(home / ".postgresql" / "postgresql.key", client_key)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PGSSLCERT", cert_file)
    monkeypatch.setenv("PGSSLKEY", key_file)
    for name in ("PGSSLROOTCERT", "PGSSLCERTMODE", "PGSSLMODE", "PGGSSENCMODE"):
        monkeypatch.delenv(name, raising=False)
    try:
        yield Setup(fake, client_cert, client_key, cert_file, key_file)
    finally:
        listener.close()
        await listener.wait_closed()


def descriptor(port: int, ssl_settings: TlsSettings) -> ConnectionDescriptor:
    return ConnectionDescriptor(
        config_name="pg",
        type=EngineType.POSTGRESQL,
        host="127.0.0.1",
        port=port,
        database="db",
        username="reader",
        password="pw",
        ssl=ssl_settings,
    )


async def connect_once(connection: ConnectionDescriptor) -> None:
    with pytest.raises(EngineError):  # the fake closes right after the handshake
        async with PostgresConnector(connection):
            pass


async def test_the_fake_sees_the_service_certificate_when_libpq_is_left_alone(
    setup: Setup,
) -> None:
    # The danger itself: plain libpq offers the environment's certificate to any server.
    with pytest.raises(psycopg.OperationalError):
        await psycopg.AsyncConnection.connect(
            host="127.0.0.1", port=setup.server.port, dbname="db", user="u", sslmode="require"
        )
    assert setup.server.presented
    assert setup.server.presented[0] is not None


@pytest.mark.parametrize("mode", ["require", "prefer", "verify-ca", "verify-full"])
async def test_without_ssl_cert_no_client_certificate_is_offered(setup: Setup, mode: str) -> None:
    await connect_once(descriptor(setup.server.port, TlsSettings(mode=mode)))
    if mode in ("verify-ca", "verify-full"):
        # No CA for the fake's certificate: the handshake stops at the server's certificate,
        # possibly before the server records anything; what it recorded has no client cert.
        assert all(cert is None for cert in setup.server.presented)
        return
    assert setup.server.presented, "the handshake never reached the fake"
    assert all(cert is None for cert in setup.server.presented)


async def test_the_connections_own_certificate_is_offered(setup: Setup) -> None:
    own = TlsSettings(mode="require", cert=setup.client_cert, key=setup.client_key)
    await connect_once(descriptor(setup.server.port, own))
    assert setup.server.presented
    assert setup.server.presented[-1] is not None
