"""§11.2 MySQL TLS modes against a real TLS-enabled MariaDB (issue 13).

The shared MariaDB on this machine has TLS disabled (see test_mysql_connector.py for the modes
that must then fail or fall back). Here a private ``mariadbd`` is started on a loopback port
with a test CA, a server certificate for the NAME ``mariadb.test`` only (no IP in it), and a
client certificate; the connector dials the pinned address 127.0.0.1 while verifying the name
(§2.9.1 rule 3). A small proxy that clears ``CLIENT.SSL`` from the server greeting shows the
TLS-active check: a stripped capability flag fails the connect.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from pathlib import Path

import pytest
from asyncmy.constants import CLIENT
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fetcher.adapters.sql.mysql import MysqlConnector
from fetcher.engine import ConnectionDescriptor, EngineError, ErrorCategory
from fetcher.engine.model import TlsSettings
from fetcher.engine.types import EngineType
from tests.services import service_missing

pytestmark = pytest.mark.integration

NAME = "mariadb.test"
PASSWORD = "tls-Reader-pw;1"


@dataclass(frozen=True)
class Pki:
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _issue(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    dns: str | None = None,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, issuer_key = issuer if issuer is not None else (name, key)
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if dns is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _pki() -> Pki:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue("Fetcher Test CA", ca_key, None)
    issuer = (ca.subject, ca_key)
    server_key, client_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    server = _issue(NAME, server_key, issuer, dns=NAME)
    client = _issue("fetcher-client", client_key, issuer)

    def pem(cert: x509.Certificate) -> str:
        return cert.public_bytes(serialization.Encoding.PEM).decode()

    return Pki(pem(ca), pem(server), _pem_key(server_key), pem(client), _pem_key(client_key))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tool(name: str) -> str:
    """The absolute path of a MariaDB program (checked present by the fixture)."""
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} is not installed")
    return path


def _sql(sock: Path, statement: str) -> None:
    subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [_tool("mariadb"), "--no-defaults", f"--socket={sock}", "-uroot", "-e", statement],
        check=True,
        capture_output=True,
        timeout=30,
    )


@dataclass(frozen=True)
class TlsServer:
    port: int
    pki: Pki
    descriptor: ConnectionDescriptor


def _start(directory: Path, pki: Pki) -> tuple[subprocess.Popen[bytes], int]:
    for file, text in (
        ("ca.pem", pki.ca),
        ("cert.pem", pki.server_cert),
        ("key.pem", pki.server_key),
    ):
        (directory / file).write_text(text)
    data = directory / "data"
    subprocess.run(  # noqa: S603 - fixed argv of a local tool, no shell
        [_tool("mariadb-install-db"), "--no-defaults", f"--datadir={data}", "--user=root",
         "--auth-root-authentication-method=normal", "--skip-test-db"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    port = _free_port()
    server = subprocess.Popen(  # noqa: S603 - fixed argv of a local tool, no shell
        [_tool("mariadbd"), "--no-defaults", f"--datadir={data}", "--user=root", f"--port={port}",
         "--bind-address=127.0.0.1", f"--socket={directory / 'sock'}",
         f"--pid-file={directory / 'pid'}", f"--log-error={directory / 'err.log'}",
         "--innodb-buffer-pool-size=16M", "--performance-schema=OFF", "--skip-name-resolve",
         f"--ssl-ca={directory / 'ca.pem'}", f"--ssl-cert={directory / 'cert.pem'}",
         f"--ssl-key={directory / 'key.pem'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return server, port


def _wait_ready(sock: Path, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("mariadbd exited")
        with contextlib.suppress(subprocess.CalledProcessError):
            _sql(sock, "SELECT 1")
            return
        time.sleep(0.2)
    raise RuntimeError("mariadbd did not start")


@pytest.fixture(scope="module")
def tls_server() -> Iterator[TlsServer]:
    if shutil.which("mariadbd") is None or shutil.which("mariadb-install-db") is None:
        service_missing("mariadbd (for a private TLS server)", "not installed")
    directory = Path(tempfile.mkdtemp(prefix="fetcher-mariadb-tls-"))
    pki = _pki()
    server, port = _start(directory, pki)
    try:
        _wait_ready(directory / "sock", server)
        _sql(
            directory / "sock",
            "CREATE DATABASE ledger; CREATE TABLE ledger.t (id INT); "
            f"CREATE USER 'reader'@'%' IDENTIFIED BY '{PASSWORD}'; "
            "GRANT SELECT ON ledger.* TO 'reader'@'%'; "
            f"CREATE USER 'certified'@'%' IDENTIFIED BY '{PASSWORD}' REQUIRE X509; "
            "GRANT SELECT ON ledger.* TO 'certified'@'%';",
        )
        descriptor = ConnectionDescriptor(
            config_name="maria_tls",
            type=EngineType.MYSQL,
            host=NAME,
            port=port,
            database="ledger",
            username="reader",
            password=PASSWORD,
        )
        yield TlsServer(port, pki, descriptor)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(directory, ignore_errors=True)


async def _cipher(descriptor: ConnectionDescriptor, pinned: str = "127.0.0.1") -> object:
    """Connect, probe, and return the session's TLS cipher (``None``: plaintext)."""
    async with MysqlConnector(descriptor, pinned_address=pinned) as connector:
        await connector.probe()
        ssl_object = connector._conn._transport.get_extra_info("ssl_object")
        return None if ssl_object is None else ssl_object.cipher()


async def _connect_error(
    descriptor: ConnectionDescriptor, pinned: str = "127.0.0.1"
) -> EngineError:
    with pytest.raises(EngineError) as caught:
        await _cipher(descriptor, pinned)
    assert caught.value.category is ErrorCategory.CONNECT
    assert PASSWORD not in str(caught.value.detail)
    return caught.value


async def test_true_verifies_the_chain_and_the_name_while_dialling_the_pinned_ip(
    tls_server: TlsServer,
) -> None:
    good = replace(tls_server.descriptor, ssl=TlsSettings(mode="true", ca=tls_server.pki.ca))
    assert await _cipher(good) is not None
    # The certificate names mariadb.test only: another name fails the hostname check …
    await _connect_error(replace(good, host="other.test"))
    # … and without the CA the chain is checked against the system store, and fails.
    await _connect_error(replace(good, ssl=TlsSettings(mode="true")))


@pytest.mark.parametrize("mode", ["skip-verify", "preferred"])
async def test_unverified_modes_encrypt(tls_server: TlsServer, mode: str) -> None:
    descriptor = replace(tls_server.descriptor, host="any.name", ssl=TlsSettings(mode=mode))
    assert await _cipher(descriptor) is not None


async def test_false_stays_in_plaintext(tls_server: TlsServer) -> None:
    descriptor = replace(tls_server.descriptor, ssl=TlsSettings(mode="false"))
    assert await _cipher(descriptor) is None


async def test_client_certificate_from_ssl_cert_and_key(tls_server: TlsServer) -> None:
    pki = tls_server.pki
    certified = replace(tls_server.descriptor, username="certified")
    with_cert = replace(
        certified,
        ssl=TlsSettings(mode="true", ca=pki.ca, cert=pki.client_cert, key=pki.client_key),
    )
    assert await _cipher(with_cert) is not None
    await _connect_error(replace(certified, ssl=TlsSettings(mode="true", ca=pki.ca)))


@contextlib.asynccontextmanager
async def _stripping_proxy(upstream_port: int) -> AsyncIterator[int]:
    """A loopback proxy that clears ``CLIENT.SSL`` in the server greeting, then relays bytes.

    Each connection's task closes both of its transports however it ends (cancelled by the
    clean-up included), so none is left for the garbage collector to warn about."""
    tasks: set[asyncio.Task[None]] = set()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", upstream_port)
        try:
            header = await server_r.readexactly(4)
            size = int.from_bytes(header[:3], "little")
            payload = bytearray(await server_r.readexactly(size))
            at = payload.index(0, 1) + 1 + 4 + 8 + 1  # version, NUL, thread id, scramble, filler
            flags = int.from_bytes(payload[at : at + 2], "little") & ~CLIENT.SSL
            payload[at : at + 2] = flags.to_bytes(2, "little")
            client_w.write(header + payload)
            await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w))
        finally:
            server_w.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            tasks.add(task)
        try:
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                await relay(client_r, client_w)
        finally:
            client_w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
        await asyncio.sleep(0)  # the closed transports' connection_lost callbacks run


async def test_a_stripped_ssl_capability_fails_the_tls_required_modes(
    tls_server: TlsServer,
) -> None:
    async with _stripping_proxy(tls_server.port) as port:
        for tls in (
            TlsSettings(mode="true", ca=tls_server.pki.ca),
            TlsSettings(mode="skip-verify"),
        ):
            descriptor = replace(tls_server.descriptor, port=port, ssl=tls)
            await _connect_error(descriptor)
        # The proxy itself relays a session fine when no TLS is required.
        plain = replace(tls_server.descriptor, port=port, ssl=TlsSettings(mode="false"))
        assert await _cipher(plain) is None


def test_the_server_certificate_names_no_address(tls_server: TlsServer) -> None:
    """What makes the pinned-address test meaningful: the IP alone would fail the check."""
    cert = x509.load_pem_x509_certificate(tls_server.pki.server_cert.encode())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == []
    assert IPv4Address("127.0.0.1") not in san.get_values_for_type(x509.IPAddress)
