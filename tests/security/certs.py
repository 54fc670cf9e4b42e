"""Test certificates made with the ``cryptography`` package: a CA, a server certificate for
127.0.0.1/localhost, client certificates, a second (untrusted) CA; PEM files in a directory."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "key-secret"


def _name(cn: str, org: str = "Tidelog Test") -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


@dataclass
class Issued:
    key_pem: bytes
    cert_pem: bytes


class Authority:
    def __init__(self, cn: str) -> None:
        self.key = _key()
        now = datetime.datetime.now(datetime.UTC)
        self.name = _name(cn)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, cn: str, *, server: bool, org: str = "Tidelog Test") -> Issued:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, org))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        return Issued(_pem_key(key), cert.public_bytes(serialization.Encoding.PEM))


@dataclass
class CertFiles:
    dir: Path
    ca: Path  # trusted CA (PEM)
    server_keystore: Path  # encrypted PKCS#8 key + chain, password KEY_PASSWORD
    server_key_plain: bytes
    server_chain: bytes
    client_key: Path
    client_cert: Path
    rogue_key: Path  # client cert signed by a CA the broker does not trust
    rogue_cert: Path
    client_dn: str


def make_certs(directory: Path) -> CertFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca = Authority("Tidelog Test CA")
    other = Authority("Someone Else CA")
    server = ca.issue("localhost", server=True)
    client = ca.issue("alice", server=False, org="Acme, Inc")
    rogue = other.issue("mallory", server=False)
    server_key_obj = serialization.load_pem_private_key(server.key_pem, None)
    assert isinstance(server_key_obj, ec.EllipticCurvePrivateKey)

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        return path

    return CertFiles(
        dir=directory,
        ca=write("ca.pem", ca.cert_pem),
        server_keystore=write(
            "server.keystore.pem",
            _pem_key(server_key_obj, KEY_PASSWORD) + server.cert_pem + ca.cert_pem,
        ),
        server_key_plain=server.key_pem,
        server_chain=server.cert_pem + ca.cert_pem,
        client_key=write("client.key", client.key_pem),
        client_cert=write("client.pem", client.cert_pem),
        rogue_key=write("rogue.key", rogue.key_pem),
        rogue_cert=write("rogue.pem", rogue.cert_pem),
        client_dn="CN=alice,O=Acme\\, Inc,C=US",
    )


def ssl_settings(certs: CertFiles, prefix: str = "") -> dict[str, str]:
    """Broker settings of a TLS listener with the PEM key store (``prefix``: listener.name.x.)."""
    return {
        f"{prefix}ssl.keystore.type": "PEM",
        f"{prefix}ssl.keystore.location": str(certs.server_keystore),
        f"{prefix}ssl.key.password": KEY_PASSWORD,
        f"{prefix}ssl.truststore.type": "PEM",
        f"{prefix}ssl.truststore.location": str(certs.ca),
    }
