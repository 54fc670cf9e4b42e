"""In-process cost of a Metadata answer for every topic (issue 20: <= 100 ms for 20 x 1,000).

Starts a ``Broker`` in this process on a temporary log dir, creates ``--topics`` topics of
``--partitions`` partitions, then for each Metadata version below dispatches an all-topics
request through the broker's router (request decode, handler, encoding, framing: everything
but the socket). It reports the first answer (which encodes the shared partition arrays, one
per partition count) and the median and max of the next ``--runs`` answers, in milliseconds.
For comparison it re-encodes the same answer with kio's generic writer (``codec.encode_response``
on the answer decoded by kio's reader: the writer the handler used before
``protocol.fast.metadata``) and checks both give the same bytes.

With ``--clients`` it then serves the broker's listener from a thread and times, over the
socket, the raw round trip of an all-topics Metadata v12 request (send, read the whole answer)
and confluent-kafka's ``list_topics()`` (what ``scripts/bench/partitions.py`` measures): the
difference is the client's own parsing.

    .venv/bin/python scripts/bench/metadata_answer.py [--topics 20] [--partitions 1000]
        [--clients] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kio.serial import entity_reader, entity_writer

from tidelog.broker.app import Broker
from tidelog.config import load_broker_config
from tidelog.protocol import codec
from tidelog.protocol.fast import metadata as fast_metadata
from tidelog.protocol.schema import build, request_types

VERSIONS = (0, 1, 4, 5, 8, 9, 12, 13)
API_KEY = 3


def _frame(version: int, correlation_id: int) -> bytes:
    request = build(
        request_types(API_KEY, version).MetadataRequest,
        topics=() if version == 0 else None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=False,
    )
    header = struct.pack(">hhih", API_KEY, version, correlation_id, 5) + b"bench"
    if codec.request_header_version(API_KEY, version) >= 2:
        header += b"\x00"
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    return header + body.getvalue()


def _answer(loop: asyncio.AbstractEventLoop, broker: Broker, frame: bytes) -> bytes:
    outcome: Any = broker.router.dispatch(frame, "127.0.0.1", 1)
    if asyncio.iscoroutine(outcome):
        outcome = loop.run_until_complete(outcome)
    if isinstance(outcome, list):
        return b"".join(bytes(chunk) for chunk in outcome)
    assert isinstance(outcome, bytes), outcome
    return outcome


def _time_ms(fn: Any, runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), max(samples)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


def _clients(broker: Broker, loop: asyncio.AbstractEventLoop, runs: int) -> dict[str, Any]:
    """Round trips over the socket while the broker's loop runs in a thread."""
    from confluent_kafka.admin import AdminClient

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        port = broker.advertised_port(broker.endpoint_for("PLAINTEXT"))
        frame = _frame(12, 9)
        with socket.create_connection(("127.0.0.1", port)) as sock:

            def round_trip() -> None:
                sock.sendall(struct.pack(">i", len(frame)) + frame)
                (size,) = struct.unpack(">i", _read_exactly(sock, 4))
                _read_exactly(sock, size)

            round_trip()
            raw = _time_ms(round_trip, runs)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.list_topics(timeout=30)
        listed = _time_ms(lambda: admin.list_topics(timeout=30), runs)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
    print(f"raw Metadata v12 round trip over the socket: median {raw[0]:.1f} ms (max {raw[1]:.1f})")
    print(f"confluent-kafka list_topics(): median {listed[0]:.1f} ms (max {listed[1]:.1f})")
    return {
        "raw_round_trip_ms_median": round(raw[0], 2),
        "raw_round_trip_ms_max": round(raw[1], 2),
        "confluent_list_topics_ms_median": round(listed[0], 2),
        "confluent_list_topics_ms_max": round(listed[1], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=1000, help="partitions per topic")
    parser.add_argument("--runs", type=int, default=20, help="answers timed per version")
    parser.add_argument(
        "--clients", action="store_true", help="also time round trips over the socket"
    )
    parser.add_argument("--json", action="store_true", help="print the JSON too")
    args = parser.parse_args()
    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory(prefix="tidelog-metadata-bench-") as log_dir:
        config = load_broker_config(
            overrides=(f"log.dirs={log_dir}", "listeners=PLAINTEXT://127.0.0.1:0")
        )
        broker = Broker(config)
        loop.run_until_complete(broker.start())
        try:
            started = time.perf_counter()
            for i in range(args.topics):
                broker.topics.create_topic(f"bench-{i}", args.partitions)
                print(f"created {i + 1} of {args.topics} topics", end="\r", file=sys.stderr)
            print(
                f"created {args.topics} x {args.partitions} partitions in "
                f"{time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
            results: dict[str, Any] = {"topics": args.topics, "partitions": args.partitions}
            print(
                f"{'version':>7} {'first ms':>9} {'answer ms (median/max)':>24} "
                f"{'kio writer ms':>14} {'KiB':>6}"
            )
            for version in VERSIONS:
                frame = _frame(version, 7)
                # the first answer encodes the shared partition arrays (one per count)
                fast_metadata.clear_partition_arrays()
                started = time.perf_counter()
                answer = _answer(loop, broker, frame)
                first_ms = (time.perf_counter() - started) * 1000
                header = 8 + (1 if codec.response_header_version(API_KEY, version) else 0)
                schema = codec.response_schema(API_KEY, version)
                decoded, end = entity_reader(schema)(answer, header)
                assert header + end == len(answer), "trailing bytes"
                assert len(decoded.topics) >= args.topics, "topics missing"
                kio = codec.encode_response(API_KEY, version, 7, decoded)
                assert kio == answer, f"v{version}: the answer differs from kio's encoding"
                fast = _time_ms(lambda f=frame: _answer(loop, broker, f), args.runs)
                slow = _time_ms(
                    lambda d=decoded, v=version: codec.encode_response(API_KEY, v, 7, d),
                    max(3, args.runs // 5),
                )
                print(
                    f"{version:>7} {first_ms:>9.2f} {fast[0]:>14.2f} / {fast[1]:>7.2f} "
                    f"{slow[0]:>14.1f} "
                    f"{len(answer) // 1024:>6}"
                )
                results[f"v{version}"] = {
                    "first_answer_ms": round(first_ms, 3),
                    "answer_ms_median": round(fast[0], 3),
                    "answer_ms_max": round(fast[1], 3),
                    "kio_writer_ms_median": round(slow[0], 1),
                    "bytes": len(answer),
                }
            if args.clients:
                results["socket"] = _clients(broker, loop, args.runs)
            if args.json:
                print(json.dumps(results))
        finally:
            loop.run_until_complete(broker.stop())
            loop.close()


if __name__ == "__main__":
    main()
