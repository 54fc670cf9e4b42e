"""Broker CPU per small Produce request (the per-request cost that e2e-latency at linger 0 hits).

Starts tidelog (``--tree`` runs another checkout's code), creates a topic, then sends
``--count`` one-record Produce requests of ``--version`` (v10 is what confluent-kafka sends,
v7 what kcat sends) with ``--window`` requests in flight, and prints the broker's user+system
CPU time per request (``/proc/<pid>/stat``), which does not depend on the machine's load the
way wall rates do.

    .venv/bin/python scripts/bench/produce_cpu.py --count 20000 --version 10 --runs 3

``--topic-config flush.messages=9223372036854775807`` measures page-cache acks: since issue 14
a topic on the defaults fsyncs before each ack, so an A/B against a tree from before that
change compares the fsync, not the code, unless both sides get this setting.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rawkafka import record_batch
from servers import Tidelog
from workloads import create_topic

_SIZE = struct.Struct(">i")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def produce_request(version: int, topic: str, batch: bytes, acks: int) -> bytes:
    """Request header + ProduceRequest body, size prefix included (correlation id 0)."""
    client_id = b"rdkafka"
    name = topic.encode()
    head = struct.pack(">hhih", 0, version, 0, len(client_id)) + client_id
    if version >= 9:
        body = (
            head
            + b"\x00"  # header tagged fields
            + b"\x00"  # transactional id: null
            + struct.pack(">hi", acks, 30_000)
            + _uvarint(2)
            + _uvarint(len(name) + 1)
            + name
            + _uvarint(2)
            + struct.pack(">i", 0)
            + _uvarint(len(batch) + 1)
            + batch
            + b"\x00\x00\x00"  # partition, topic, request tagged fields
        )
    else:
        body = (
            head
            + struct.pack(">hhii", -1, acks, 30_000, 1)
            + struct.pack(">h", len(name))
            + name
            + struct.pack(">iii", 1, 0, len(batch))
            + batch
        )
    return _SIZE.pack(len(body)) + body


def run(
    server: Tidelog,
    version: int,
    count: int,
    window: int,
    acks: int,
    configs: dict[str, str] | None = None,
) -> float:
    topic = f"cpu-{version}-{time.monotonic_ns()}"
    create_topic(server.bootstrap, topic, configs)
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = bytearray(produce_request(version, topic, record_batch([b"x" * 100], 0), acks))
    reader = sock.makefile("rb")

    def send(correlation: int) -> None:
        struct.pack_into(">i", request, 8, correlation)
        sock.sendall(request)

    def receive() -> None:
        (size,) = _SIZE.unpack(reader.read(4))
        answer = reader.read(size)
        if len(answer) != size:
            raise ConnectionError("short answer")

    for i in range(500):  # warm-up
        send(i)
        receive()
    before = server.cpu_seconds()
    sent = received = 0
    while received < count:
        while sent < count and sent - received < window:
            send(sent)
            sent += 1
        receive()
        received += 1
    cpu = server.cpu_seconds() - before
    sock.close()
    return cpu / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--version", type=int, action="append")
    parser.add_argument("--window", type=int, default=1)
    parser.add_argument("--acks", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tree", type=Path, default=None)
    parser.add_argument(
        "--topic-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic setting of the measured topic (repeatable)",
    )
    args = parser.parse_args()
    configs = dict(item.split("=", 1) for item in args.topic_config)
    with tempfile.TemporaryDirectory(prefix="produce-cpu-") as tmp:
        server = Tidelog("tidelog", Path(tmp), tree=args.tree)
        server.start()
        try:
            for version in args.version or [10]:
                figures = [
                    run(server, version, args.count, args.window, args.acks, configs)
                    for _ in range(args.runs)
                ]
                shown = ", ".join(f"{f:.1f}" for f in figures)
                median = sorted(figures)[len(figures) // 2]
                print(
                    f"Produce v{version} acks={args.acks} window={args.window}: "
                    f"broker CPU us/request {shown} (median {median:.1f})"
                )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
