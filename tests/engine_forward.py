"""A second Docker engine endpoint for tests: the local engine's socket on 127.0.0.1:PORT.

:class:`Forwarder` accepts TCP connections (optionally terminating TLS with
a certificate signed by a test CA) and pipes each one to the engine's unix
socket, byte for byte — what a remote engine behind ``DOCKER_HOST=tcp://…``
looks like to the Docker SDK. :func:`make_tls_files` writes a CA, a server
certificate for 127.0.0.1 and a client certificate in the layout
``DOCKER_CERT_PATH`` expects (``ca.pem``, ``cert.pem``, ``key.pem``).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import select
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

ENGINE_SOCKET = "/var/run/docker.sock"


class Forwarder:
    """``tcp://127.0.0.1:<port>`` → the engine's unix socket, in threads, until closed."""

    def __init__(self, tls: ssl.SSLContext | None = None, target: str = ENGINE_SOCKET) -> None:
        self.tls = tls
        self.target = target
        self.connections = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            if self.tls is not None:
                client = self.tls.wrap_socket(client, server_side=True)
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(self.target)
        except (OSError, ssl.SSLError):
            client.close()  # a refused handshake (wrong CA on the client's side) ends here
            return
        try:
            _relay(client, engine)
        finally:
            for end in (client, engine):
                end.close()

    def close(self) -> None:
        self._closed.set()
        self._server.close()

    def __enter__(self) -> Forwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _relay(client: socket.socket, engine: socket.socket) -> None:
    # One thread per connection: an SSL object is not thread-safe, and an
    # unwrap() racing a recv() on another thread aborts the process in OpenSSL.
    # Half-close on EOF: a container's stdin ends when the client shuts its write side.
    up = True  # client -> engine still open
    try:
        while True:
            pending = up and isinstance(client, ssl.SSLSocket) and client.pending() > 0
            readers = [engine, client] if up else [engine]
            ready = [client] if pending else select.select(readers, [], [])[0]
            for source in ready:
                chunk = source.recv(65536)
                if source is engine:
                    if not chunk:
                        with contextlib.suppress(OSError, ValueError):
                            if isinstance(client, ssl.SSLSocket):
                                client.unwrap()
                            else:
                                client.shutdown(socket.SHUT_WR)
                        return
                    client.sendall(chunk)
                elif chunk:
                    engine.sendall(chunk)
                else:
                    up = False
                    with contextlib.suppress(OSError):
                        engine.shutdown(socket.SHUT_WR)
    except (OSError, ValueError):
        return


def _name(common: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificate(
    subject: str, issuer: Any, issuer_key: Any, key: Any, *, ca: bool, server: bool
) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=not ca,
                data_encipherment=False, key_agreement=False, key_cert_sign=ca, crl_sign=ca,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    )  # fmt: skip
    if not ca:
        usage = (
            x509.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.ExtendedKeyUsageOID.CLIENT_AUTH
        )
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def make_tls_files(folder: Path) -> dict[str, Path]:
    """A CA, a server and a client certificate; returns their paths.

    ``folder`` gets ``ca.pem``, ``cert.pem`` and ``key.pem`` (the client's, as
    ``DOCKER_CERT_PATH`` expects) plus ``server-cert.pem`` and ``server-key.pem``.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate(
        "cortex test CA", _name("cortex test CA"), ca_key, ca_key, ca=True, server=False
    )
    files: dict[str, Path] = {}

    def write(name: str, data: bytes) -> None:
        files[name] = folder / name
        files[name].write_bytes(data)

    pem = serialization.Encoding.PEM
    key_format = serialization.PrivateFormat.PKCS8
    plain = serialization.NoEncryption()
    write("ca.pem", ca.public_bytes(pem))
    for prefix, server in (("server-", True), ("", False)):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(
            "127.0.0.1" if server else "client", ca.subject, ca_key, key, ca=False, server=server
        )
        write(f"{prefix}cert.pem", cert.public_bytes(pem))
        write(f"{prefix}key.pem", key.private_bytes(pem, key_format, plain))
    return files


def server_context(files: dict[str, Path]) -> ssl.SSLContext:
    """TLS for :class:`Forwarder`'s side, with the server certificate of ``files``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files["server-cert.pem"], files["server-key.pem"])
    return context
