"""The server side of TLS for SSL and SASL_SSL listeners (Python's ``ssl`` module).

Settings are read as the listener sees them (``listener.name.<listener>.ssl.*`` first):

- key store: ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (one PEM file holding the
  private key, plain or encrypted PKCS#8 with ``ssl.key.password``, and the certificate chain),
  or inline ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``;
- trust store (client certificates): ``ssl.truststore.type=PEM`` with ``ssl.truststore.location``
  or inline ``ssl.truststore.certificates``;
- ``ssl.client.auth`` none | requested | required; ``ssl.enabled.protocols``;
  ``ssl.cipher.suites`` (OpenSSL names, or IANA names such as
  ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``, which are translated).

JKS and PKCS12 stores are refused at start-up with the command that converts them.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from pathlib import Path

from tidelog.config import ConfigError

__all__ = ("server_context",)

Lookup = Callable[[str], object]

_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
#: TLS 1.3 suites cannot be narrowed through Python's ssl module.
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}


def _store_type(get: Lookup, setting: str, location: str | None, where: str) -> None:
    kind = str(get(setting) or "").upper()
    if kind == "PEM":
        return
    if location is not None and kind == "JKS" and _looks_pem(Path(location)):
        # Kafka divergence: Kafka's default type is JKS and it would fail on a PEM file; a PEM
        # file with the type left at its default is read as PEM.
        return
    if location is None and kind == "JKS":
        return
    raise ConfigError(
        setting,
        f"{where}: {setting}={kind} is not supported; tidelog reads PEM only. Convert the store "
        "(keytool -importkeystore -deststoretype PKCS12, then openssl pkcs12 -in store.p12 "
        "-out store.pem) and set "
        f"{setting}=PEM.",
    )


def _looks_pem(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return b"-----BEGIN" in f.read(4096)
    except OSError:
        return False


def _secret(get: Lookup, name: str) -> str | None:
    value = get(name)
    return None if value is None or value == "" else str(value)


def server_context(get: Lookup, where: str) -> ssl.SSLContext:
    """The server context of one listener; ``get`` reads a setting as the listener sees it;
    ``where`` names the listener in errors."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    location = _secret(get, "ssl.keystore.location")
    _store_type(get, "ssl.keystore.type", location, where)
    key_password = _secret(get, "ssl.key.password")
    inline_key = _secret(get, "ssl.keystore.key")
    inline_chain = _secret(get, "ssl.keystore.certificate.chain")
    try:
        if location is not None:
            ctx.load_cert_chain(location, password=key_password)
        elif inline_key is not None and inline_chain is not None:
            _load_inline_chain(ctx, inline_key, inline_chain, key_password)
        else:
            raise ConfigError(
                "ssl.keystore.location",
                f"{where} uses TLS but has no key store: set ssl.keystore.location (PEM file "
                "with the key and certificate chain) or ssl.keystore.key and "
                "ssl.keystore.certificate.chain.",
            )
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            "ssl.keystore.location",
            f"{where}: cannot load the key store ({_reason(exc)}); check the file, that the "
            "key matches the certificate, and ssl.key.password for an encrypted key.",
        ) from None
    client_auth = str(get("ssl.client.auth") or "none").lower()
    trust_location = _secret(get, "ssl.truststore.location")
    trust_inline = _secret(get, "ssl.truststore.certificates")
    _store_type(get, "ssl.truststore.type", trust_location, where)
    try:
        if trust_location is not None:
            ctx.load_verify_locations(cafile=trust_location)
        elif trust_inline is not None:
            ctx.load_verify_locations(cadata=trust_inline)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            "ssl.truststore.location", f"{where}: cannot load the trust store ({_reason(exc)})."
        ) from None
    if client_auth != "none" and trust_location is None and trust_inline is None:
        raise ConfigError(
            "ssl.client.auth",
            f"{where}: ssl.client.auth={client_auth} needs the CAs of client certificates: set "
            "ssl.truststore.location or ssl.truststore.certificates.",
        )
    ctx.verify_mode = {
        "required": ssl.CERT_REQUIRED,
        "requested": ssl.CERT_OPTIONAL,
    }.get(client_auth, ssl.CERT_NONE)
    _set_versions(ctx, get, where)
    _set_ciphers(ctx, get, where)
    return ctx


def _reason(exc: BaseException) -> str:
    return getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)


def _load_inline_chain(ctx: ssl.SSLContext, key: str, chain: str, password: str | None) -> None:
    """``load_cert_chain`` reads files only: the inline PEM goes through a private temporary
    file (mode 0600, removed at once)."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="tidelog-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _set_versions(ctx: ssl.SSLContext, get: Lookup, where: str) -> None:
    raw = get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]
    names = raw if isinstance(raw, list) else [str(raw)]
    versions = []
    for name in names:
        version = _VERSIONS.get(str(name))
        if version is None:
            raise ConfigError(
                "ssl.enabled.protocols",
                f"{where}: unknown TLS version {name!r} in ssl.enabled.protocols "
                f"(use {', '.join(_VERSIONS)}).",
            )
        versions.append(version)
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)


def iana_to_openssl(name: str) -> str:
    """``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` -> ``ECDHE-RSA-AES128-GCM-SHA256``."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, _, cipher = name[4:].partition("_WITH_")
    kx = kx.replace("_", "-")
    cipher = cipher.replace("AES_128", "AES128").replace("AES_256", "AES256")
    cipher = cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305")
    cipher = cipher.replace("_", "-")
    if kx == "RSA":
        return cipher
    return f"{kx}-{cipher}"


def _set_ciphers(ctx: ssl.SSLContext, get: Lookup, where: str) -> None:
    raw = get("ssl.cipher.suites") or []
    names = [str(n) for n in (raw if isinstance(raw, list) else [raw]) if str(n)]
    # Kafka divergence: TLS 1.3 suites are always those of OpenSSL's defaults (Python's ssl
    # cannot narrow them); the names are accepted.
    legacy = [iana_to_openssl(n) for n in names if n not in _TLS13_SUITES]
    if not legacy:
        return
    try:
        ctx.set_ciphers(":".join(legacy))
    except ssl.SSLError:
        raise ConfigError(
            "ssl.cipher.suites",
            f"{where}: none of ssl.cipher.suites ({', '.join(names)}) is known to OpenSSL.",
        ) from None


class TlsLayer:
    """Server-side TLS of one connection over memory buffers (``ssl.MemoryBIO``).

    The connection feeds it the bytes it reads and writes what it returns, so a failed
    handshake (wrong CA, a client without a required certificate, a plaintext client on a TLS
    port) is seen, logged and closed by the connection itself, and only that connection.
    """

    __slots__ = (
        "_incoming",
        "_object",
        "_outgoing",
        "established",
        "first_byte_checked",
        "peer_closed",
    )

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._object = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.established = False
        self.first_byte_checked = False
        #: The client sent close_notify (our own close_notify is then in the bytes to send).
        self.peer_closed = False

    def receive(self, data: bytes) -> tuple[bytes, bytes, bool]:
        """Bytes read from the socket -> (plaintext, bytes to send back, handshake just done).
        Raises ssl.SSLError (or ValueError for a client that does not speak TLS)."""
        if not self.first_byte_checked and data:
            self.first_byte_checked = True
            if data[0] != 0x16:  # a TLS handshake record
                raise ValueError(
                    "the client did not start TLS (a plaintext client on a TLS listener?)"
                )
        self._incoming.write(data)
        just_done = False
        if not self.established:
            try:
                self._object.do_handshake()
            except ssl.SSLWantReadError:
                return b"", self._outgoing.read(), False
            self.established = just_done = True
        chunks = []
        while True:
            try:
                chunk = self._object.read(262144)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                chunk = b""
            if not chunk:
                # close_notify (read() gives b"" for it): answer with ours at once; clients
                # such as aiokafka wait for it before they finish closing.
                self.peer_closed = True
                try:
                    self._object.unwrap()
                except ssl.SSLError:
                    pass
                break
            chunks.append(chunk)
        return b"".join(chunks), self._outgoing.read(), just_done

    def send(self, data: bytes | memoryview) -> bytes:
        """Plaintext -> TLS records to write."""
        view = memoryview(data)
        while view:
            written = self._object.write(view)
            view = view[written:]
        return self._outgoing.read()

    def peercert(self) -> dict[str, object] | None:
        cert = self._object.getpeercert()
        return dict(cert) if cert else None

    def version(self) -> str | None:
        return self._object.version()
