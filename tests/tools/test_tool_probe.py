"""``tidelog probe``: exit 0 when a broker answers ApiVersions, 1 otherwise, 2 on usage."""

from __future__ import annotations

import shutil
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.net import free_port as _free_port
from tests.tools.tools_fixtures import RunTool
from tidelog.tools.probe import request_bytes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_server() -> Iterator[Callable[[Callable[[socket.socket], None]], int]]:
    """Start a one-thread TCP server on 127.0.0.1 whose per-connection behaviour is given."""
    servers: list[socket.socket] = []

    def start(behaviour: Callable[[socket.socket], None]) -> int:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        srv.settimeout(10)
        servers.append(srv)

        def loop() -> None:
            try:
                while True:
                    conn, _ = srv.accept()
                    with conn:
                        behaviour(conn)
            except OSError:
                return

        threading.Thread(target=loop, daemon=True).start()
        return int(srv.getsockname()[1])

    yield start
    for srv in servers:
        srv.close()


def _answer(error_code: int, ranges: list[tuple[int, int, int]]) -> Callable[[socket.socket], None]:
    def behaviour(conn: socket.socket) -> None:
        size = struct.unpack(">i", conn.recv(4))[0]
        request = b""
        while len(request) < size:
            request += conn.recv(size - len(request))
        correlation_id = struct.unpack_from(">i", request, 4)[0]
        body = struct.pack(">ihi", correlation_id, error_code, len(ranges))
        body += b"".join(struct.pack(">hhh", *r) for r in ranges)
        conn.sendall(struct.pack(">i", len(body)) + body)

    return behaviour


def test_request_is_api_versions_v0() -> None:
    frame = request_bytes(7)
    size, key, version, correlation = struct.unpack_from(">ihhi", frame)
    assert (size, key, version, correlation) == (len(frame) - 4, 18, 0, 7)


def test_answering_broker(tidelog: RunTool, fake_server) -> None:  # type: ignore[no-untyped-def]
    port = fake_server(_answer(0, [(0, 3, 10), (1, 4, 16), (18, 0, 4)]))
    r = tidelog("probe", "--bootstrap-server", f"127.0.0.1:{port}")
    assert r.code == 0, r.err
    assert r.out.startswith(f"broker at 127.0.0.1:{port} answers ApiVersions: 3 APIs")
    assert "Produce v3-10" in r.out and "Fetch v4-16" in r.out


def test_unsupported_version_answer_counts(tidelog: RunTool, fake_server) -> None:  # type: ignore[no-untyped-def]
    port = fake_server(_answer(35, [(18, 3, 4)]))
    r = tidelog("probe", "--bootstrap-server", f"127.0.0.1:{port}")
    assert r.code == 0 and "UNSUPPORTED_VERSION" in r.out


def test_dead_port(tidelog: RunTool) -> None:
    port = _free_port()
    r = tidelog("probe", "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "2")
    assert r.code == 1
    assert r.out == ""
    assert len(r.err.splitlines()) == 1 and "connection refused" in r.err


def test_not_a_kafka_broker(tidelog: RunTool, fake_server) -> None:  # type: ignore[no-untyped-def]
    port = fake_server(lambda conn: conn.recv(100))  # reads the request, then hangs up
    r = tidelog("probe", "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "2")
    assert r.code == 1 and "closed before an answer" in r.err


def test_silent_server_times_out(tidelog: RunTool, fake_server) -> None:  # type: ignore[no-untyped-def]
    port = fake_server(lambda conn: conn.recv(100) and conn.recv(100))
    r = tidelog("probe", "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "0.5")
    assert r.code == 1 and "timed out" in r.err


def test_second_server_answers(tidelog: RunTool, fake_server) -> None:  # type: ignore[no-untyped-def]
    port = fake_server(_answer(0, [(18, 0, 4)]))
    dead = _free_port()
    r = tidelog("probe", "--bootstrap-server", f"127.0.0.1:{dead},127.0.0.1:{port}", "-q")
    assert r.code == 0 and r.out == ""


def test_without_an_address_it_probes_the_configured_listener(
    tidelog: RunTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = _free_port()
    monkeypatch.setenv("TIDELOG_LISTENERS", f"PLAINTEXT://0.0.0.0:{port}")
    r = tidelog("probe", "--timeout", "2")
    assert r.code == 1 and f"127.0.0.1:{port}: connection refused" in r.err


def test_usage_errors(tidelog: RunTool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELOG_LISTENERS", "not a listener")
    assert tidelog("probe").code == 2  # no address, and none configured
    assert tidelog("probe", "--bootstrap-server", "nohostport").code == 2
    assert tidelog("probe", "--bootstrap-server", "h:1", "--timeout", "0").code == 2


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_probe_over_tls_with_command_config(tidelog: RunTool, tmp_path: Path) -> None:
    """--command-config security.protocol=SSL: the probe speaks TLS (a TLS front of a fake
    broker that answers ApiVersions stands in for a TLS listener)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            size = struct.unpack(">i", tls.recv(4))[0]
            body = b""
            while len(body) < size:
                body += tls.recv(size - len(body))
            correlation = body[4:8]
            answer = correlation + struct.pack(">hi", 0, 1) + struct.pack(">hhh", 18, 0, 3)
            tls.sendall(struct.pack(">i", len(answer)) + answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    cfg = tmp_path / "client.properties"
    cfg.write_text(
        f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={cert}\n"
    )
    r = tidelog("probe", "--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(cfg))
    thread.join(10)
    listener.close()
    assert r.code == 0, r.err
    assert "answers ApiVersions: 1 APIs" in r.out
