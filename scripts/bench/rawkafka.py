"""A minimal Kafka wire client for the synchronous-latency workload.

One TCP connection, one ProduceRequest v7 in flight at a time, hand-built bytes (no client
library between the timer and the socket), so the figure is the broker's answer time plus one
loopback round trip. v7 is what kcat (librdkafka 2.0) sends and what every peer accepts.
"""

from __future__ import annotations

import socket
import struct
import time

from crc32c import crc32c

__all__ = ("ProduceLatencyClient", "record_batch", "zigzag_varint")

_SIZE = struct.Struct(">i")
_BATCH_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. records count
_BATCH_BEFORE_CRC = struct.Struct(">qiibI")  # base offset, length, epoch, magic, crc


def zigzag_varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record_batch(values: list[bytes], timestamp_ms: int) -> bytes:
    """A v2 record batch (no compression, no key, no headers, producer id -1)."""
    records = bytearray()
    for i, value in enumerate(values):
        body = (
            b"\x00"  # attributes
            + zigzag_varint(0)  # timestamp delta
            + zigzag_varint(i)  # offset delta
            + zigzag_varint(-1)  # key: null
            + zigzag_varint(len(value))
            + value
            + zigzag_varint(0)  # headers
        )
        records += zigzag_varint(len(body)) + body
    after_crc = (
        _BATCH_AFTER_CRC.pack(
            0, len(values) - 1, timestamp_ms, timestamp_ms, -1, -1, -1, len(values)
        )
        + records
    )
    length = 4 + 1 + 4 + len(after_crc)  # epoch, magic, crc, rest
    return _BATCH_BEFORE_CRC.pack(0, length, -1, 2, crc32c(after_crc)) + after_crc


def _produce_request_v7(topic: str, partition: int, acks: int, batch: bytes) -> bytearray:
    """Size prefix + request header v1 + ProduceRequest v7 body (correlation id 0)."""
    client_id = b"tidelog-bench"
    name = topic.encode()
    body = (
        struct.pack(">hhih", 0, 7, 0, len(client_id))
        + client_id
        + struct.pack(">hhii", -1, acks, 30_000, 1)  # transactional id null, acks, timeout, 1 topic
        + struct.pack(">h", len(name))
        + name
        + struct.pack(">iii", 1, partition, len(batch))
        + batch
    )
    return bytearray(_SIZE.pack(len(body)) + body)


class ProduceLatencyClient:
    """Sends one produce at a time and times each answer (perf_counter_ns)."""

    def __init__(self, host: str, port: int, topic: str, *, acks: int = 1, size: int = 100):
        self._sock = socket.create_connection((host, port), timeout=10)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        batch = record_batch([b"x" * size], int(time.time() * 1000))
        self._request = _produce_request_v7(topic, 0, acks, batch)
        # Error code of the first partition: after correlation id, topic count, topic name,
        # partition count and partition index.
        self._error_at = 4 + 4 + 2 + len(topic.encode()) + 4 + 4
        self._buffer = bytearray(1 << 16)
        self._view = memoryview(self._buffer)
        self._correlation = 0

    def close(self) -> None:
        self._sock.close()

    def _read_exact(self, n: int) -> memoryview:
        got = 0
        while got < n:
            k = self._sock.recv_into(self._view[got:n])
            if k == 0:
                raise ConnectionError("broker closed the connection")
            got += k
        return self._view[:n]

    def produce_once(self) -> int:
        """One request and its answer; returns the elapsed nanoseconds."""
        self._correlation += 1
        struct.pack_into(">i", self._request, 8, self._correlation)  # after size, key, version
        start = time.perf_counter_ns()
        self._sock.sendall(self._request)
        (size,) = _SIZE.unpack(self._read_exact(4))
        if size > len(self._buffer):
            raise ConnectionError(f"answer of {size} bytes is unexpectedly large")
        answer = self._read_exact(size)
        elapsed = time.perf_counter_ns() - start
        (correlation,) = _SIZE.unpack_from(answer, 0)
        if correlation != self._correlation:
            raise ConnectionError(f"correlation {correlation} != {self._correlation}")
        (error,) = struct.unpack_from(">h", answer, self._error_at)
        if error != 0:
            raise RuntimeError(f"produce answered with error code {error}")
        return elapsed
