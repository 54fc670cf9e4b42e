"""Kafka 4's Produce quirk: v0-2 advertised (for librdkafka's codecs), refused when used."""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
from pathlib import Path

import pytest

from tidelog.storage import iter_batches

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def segment_codecs(partition_dir: Path) -> set[str]:
    """The codecs of every batch stored in a partition directory."""
    found = set()
    for log in sorted(partition_dir.glob("*.log")):
        for _, header in iter_batches(log.read_bytes()):
            found.add(CODECS[header.compression])
    return found


def _api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        body = struct.pack(">hhih", 18, 0, 1, -1)
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read(s, 4))[0]
        data = _read(s, size)
    error, count = struct.unpack_from(">hi", data, 4)
    assert error == 0
    out = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", data, 10 + 6 * i)
        out[key] = (lo, hi)
    return out


def _read(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "broker closed the connection"
        buf += chunk
    return buf


def test_produce_v0_is_advertised_but_answered_unsupported(broker) -> None:  # type: ignore[no-untyped-def]
    assert _api_versions(broker.bootstrap)[0] == (0, 12)
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        for version in (0, 1, 2):
            body = struct.pack(">hhih", 0, version, 40 + version, 1) + b"c"
            body += struct.pack(">hii", 1, 1000, 1) + struct.pack(">h", 1) + b"t"
            body += struct.pack(">iii", 1, 0, 0)
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", _read(s, 4))[0]
            data = _read(s, size)
            correlation_id, topics = struct.unpack_from(">ii", data, 0)
            assert correlation_id == 40 + version
            assert topics == 1
            partition, error = struct.unpack_from(">ih", data, 4 + 4 + 2 + 1 + 4)
            assert (partition, error) == (0, 35)  # UNSUPPORTED_VERSION


@pytest.mark.integration
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kcat_really_compresses(broker, codec: str) -> None:  # type: ignore[no-untyped-def]
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (scripts/test installs it)")
    topic = f"kcat-{codec}"
    lines = "".join(f"message number {i} " * 5 + "\n" for i in range(200))
    subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-z", codec, "-X", "linger.ms=50"],
        input=lines.encode(),
        check=True,
        timeout=30,
    )
    codecs = segment_codecs(Path(broker.log_dir) / f"{topic}-0")
    assert codec in codecs, f"kcat stored {codecs}, not {codec}"
    out = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-e", "-q"],
        capture_output=True,
        check=True,
        timeout=30,
    )
    assert out.stdout.decode().splitlines() == lines.splitlines()
