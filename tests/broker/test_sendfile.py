"""Fetch answers with large record data go out by sendfile: same bytes, in order, robust.

A partition holding batches of ~200-300 KiB is read back by kafka-python, confluent-kafka
and a raw client (whose records must equal the segment file's bytes), by many concurrent
connections with pipelined fetches, and by clients that vanish in the middle of an answer.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from tests.broker.test_wire_data_path import create, fetch_request, produce
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_wire import WireClient, encode_request, make_batch
from tidelog.broker.sendfile import SENDFILE_MIN_BYTES, FileAnswer, FileSender, SendSocket
from tidelog.storage.info import FileRegion

BATCHES = 12
RECORDS_PER_BATCH = 40
VALUE_BYTES = 7_000  # ~280 KiB per batch: every answer with data is over SENDFILE_MIN_BYTES


def _values(seed: int) -> list[list[bytes]]:
    rng = random.Random(seed)
    return [[rng.randbytes(VALUE_BYTES) for _ in range(RECORDS_PER_BATCH)] for _ in range(BATCHES)]


@pytest.fixture(scope="module")
def filled(module_broker: BrokerProcess) -> Iterator[tuple[BrokerProcess, str, list[bytes]]]:
    topic = f"sendfile-{uuid.uuid4().hex[:8]}"
    values = _values(7)
    with WireClient(module_broker.bootstrap) as c:
        assert create(c, topic).error_code == 0
        for batch in values:
            answer = produce(c, topic, make_batch(batch))
            assert answer.error_code == 0
    yield module_broker, topic, [v for batch in values for v in batch]


def _segment_bytes(broker: BrokerProcess, topic: str) -> bytes:
    log = broker.log_dir / f"{topic}-0" / "00000000000000000000.log"
    return Path(log).read_bytes()


def test_raw_fetch_records_are_the_segment_file_bytes(
    filled: tuple[BrokerProcess, str, list[bytes]],
) -> None:
    broker, topic, _ = filled
    on_disk = _segment_bytes(broker, topic)
    assert len(on_disk) > 2 * 1024 * 1024
    got = b""
    offset = 0
    with WireClient(broker.bootstrap) as c:
        while offset < BATCHES * RECORDS_PER_BATCH:
            part = c.request(fetch_request(topic, offset, max_bytes=1 << 20))
            p = part.responses[0].partitions[0]
            assert p.error_code == 0
            assert len(p.records) >= SENDFILE_MIN_BYTES  # every answer here is sent by sendfile
            got += p.records
            # the last batch's last offset + 1: base offset + last offset delta + 1
            last_base = _last_batch_base(p.records)
            (delta,) = struct.unpack_from(">i", p.records, last_base + 23)
            offset = struct.unpack_from(">q", p.records, last_base)[0] + delta + 1
    assert got == on_disk


def _last_batch_base(records: bytes) -> int:
    pos = 0
    last = 0
    while pos + 12 <= len(records):
        (length,) = struct.unpack_from(">i", records, pos + 8)
        last = pos
        pos += 12 + length
    assert pos == len(records), "answer ends inside a batch"
    return last


def test_kafka_python_reads_every_record(filled: tuple[BrokerProcess, str, list[bytes]]) -> None:
    from kafka import KafkaConsumer, TopicPartition

    broker, topic, values = filled
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        consumer_timeout_ms=10_000,
        fetch_max_bytes=8 * 1024 * 1024,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = []
    for m in consumer:
        got.append(m.value)
        if len(got) == len(values):
            break
    consumer.close()
    assert got == values


def test_confluent_kafka_reads_every_record(
    filled: tuple[BrokerProcess, str, list[bytes]],
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    broker, topic, values = filled
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "sendfile-readers",
            "enable.auto.commit": False,
            "check.crcs": True,
            "fetch.max.bytes": 8 * 1024 * 1024,
            "max.partition.fetch.bytes": 4 * 1024 * 1024,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    for _ in range(200):
        for m in c.consume(500, 0.5):
            assert m.error() is None, m.error()
            value = m.value()
            assert value is not None
            got.append(value)
        if len(got) >= len(values):
            break
    c.close()
    assert got == values


def test_concurrent_pipelined_fetches_get_their_own_answers_in_order(
    filled: tuple[BrokerProcess, str, list[bytes]],
) -> None:
    """16 connections, each with 4 pipelined fetches (large answers mixed with a small
    metadata-free one: an empty fetch past the end) read concurrently."""
    broker, topic, _ = filled
    on_disk = _segment_bytes(broker, topic)
    end = BATCHES * RECORDS_PER_BATCH
    errors: list[str] = []

    def one(n: int) -> None:
        try:
            with WireClient(broker.bootstrap, timeout=30) as c:
                offsets = [0, (n * 37) % end, end, RECORDS_PER_BATCH * 3]
                ids = [
                    c.send(fetch_request(topic, o, max_bytes=(1 << 20) + n * 1000)) for o in offsets
                ]
                for cid, o in zip(ids, offsets, strict=True):
                    got, answer = c.receive()
                    assert got == cid, f"answer {got} came for request {cid}"
                    records = answer.responses[0].partitions[0].records
                    if o == end:
                        assert records == b""
                        continue
                    assert records, f"no data at offset {o}"
                    assert records in on_disk, f"records at {o} differ from the segment"
        except Exception as exc:  # collected: asserted below
            errors.append(f"connection {n}: {exc!r}")

    threads = [threading.Thread(target=one, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_clients_closing_mid_answer_leave_the_broker_serving(
    filled: tuple[BrokerProcess, str, list[bytes]],
) -> None:
    broker, topic, _ = filled
    on_disk = _segment_bytes(broker, topic)
    host, port = broker.bootstrap.rsplit(":", 1)
    frame = encode_request(fetch_request(topic, 0, max_bytes=3 << 20), 1)
    for i in range(20):
        s = socket.create_connection((host, int(port)))
        # a small receive buffer: the answer (~3 MiB) cannot fit in the socket buffers
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(frame)
        s.recv(1000 if i % 2 else 1)
        if i % 2:
            # reset (RST) rather than an orderly close
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    with WireClient(broker.bootstrap) as c:
        p = c.request(fetch_request(topic, 0, max_bytes=3 << 20)).responses[0].partitions[0]
        assert p.error_code == 0
        assert len(p.records) > 1 << 20
        assert on_disk.startswith(p.records)
    assert broker.running
    # the descriptors of the vanished answers were closed: none of the segment left over
    # beyond the broker's own (the .log is open once; duplicates would be extra entries)
    fd_dir = Path(f"/proc/{broker.proc.pid}/fd") if broker.proc else None
    if fd_dir is not None and fd_dir.exists():
        log_path = str(broker.log_dir / f"{topic}-0" / "00000000000000000000.log")
        opened = [link for link in _readlinks(fd_dir) if link == log_path]
        assert len(opened) <= 1, f"{len(opened)} descriptors of {log_path} still open"


def _readlinks(fd_dir: Path) -> list[str]:
    out = []
    for entry in os.scandir(fd_dir):
        try:
            out.append(os.readlink(entry.path))
        except OSError:
            continue
    return out


def test_small_fetch_answers_keep_the_bytes_path(
    module_broker: BrokerProcess,
) -> None:
    """Below the threshold nothing changes: a 1 KiB batch comes back as produced."""
    topic = f"small-{uuid.uuid4().hex[:8]}"
    batch = make_batch([b"x" * 1000])
    with WireClient(module_broker.bootstrap) as c:
        assert create(c, topic).error_code == 0
        assert produce(c, topic, batch).error_code == 0
        p = c.request(fetch_request(topic, 0)).responses[0].partitions[0]
    assert len(p.records) == len(batch)
    assert p.records == _segment_bytes(module_broker, topic)


# ---------------------------------------------------------------------- FileSender alone


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    return a, b


def _read_all(sock: socket.socket, n: int, out: list[bytes], delay_s: float = 0.0) -> None:
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(min(65536, n - len(got)))
        if not chunk:
            break
        got += chunk
        if delay_s:
            time.sleep(delay_s)
    out.append(bytes(got))


@pytest.mark.parametrize("in_thread", [False, True])
def test_file_sender_sends_head_regions_tail_through_a_full_socket(
    tmp_path: Path, in_thread: bool
) -> None:
    """4 MiB through a socket pair read slowly: partial sends, waits for the socket to drain
    (on the loop with add_writer, or in a worker thread), several regions, head and tail."""
    data = random.Random(5).randbytes(4 << 20)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    regions = (FileRegion(str(path), 10, 3 << 20), FileRegion(str(path), (3 << 20) + 10, 5000))
    answer = FileAnswer(b"HEAD", regions, b"TAIL")
    expected = b"HEAD" + data[10 : (3 << 20) + 10 + 5000] + b"TAIL"
    a, b = _pair()
    out: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(b, len(expected), out, 0.0005))
    reader.start()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        send_socket = SendSocket(a.fileno())

        async def run_blocking(fn: Any) -> Any:
            return await loop.run_in_executor(None, fn)

        sender = FileSender(loop, send_socket, answer, run_blocking, in_thread=in_thread)
        await asyncio.wait_for(sender.start(), 30)
        assert sender._fds == []  # the segment duplicates are closed
        send_socket.close()

    uvloop.run(main())
    reader.join(30)
    a.close()
    b.close()
    assert len(out[0]) == len(expected)
    assert out[0] == expected


def test_file_sender_cancelled_mid_answer_closes_its_descriptors(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"x" * (8 << 20))
    answer = FileAnswer(b"HEAD", (FileRegion(str(path), 0, 8 << 20),), b"")
    a, b = _pair()  # nobody reads b: the socket fills up

    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        send_socket = SendSocket(a.fileno())

        async def run_blocking(fn: Any) -> Any:
            return await loop.run_in_executor(None, fn)

        sender = FileSender(loop, send_socket, answer, run_blocking)
        fds = list(sender._fds)
        done = sender.start()
        await asyncio.sleep(0.05)
        assert not done.done()  # waiting for the socket to drain
        sender.cancel()
        send_socket.close()
        assert done.cancelled()
        return fds

    fds = uvloop.run(main())
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)
    a.close()
    b.close()


def test_file_sender_reports_a_vanished_peer(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"y" * (4 << 20))
    answer = FileAnswer(b"HEAD", (FileRegion(str(path), 0, 4 << 20),), b"")
    a, b = _pair()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        send_socket = SendSocket(a.fileno())

        async def run_blocking(fn: Any) -> Any:
            return await loop.run_in_executor(None, fn)

        sender = FileSender(loop, send_socket, answer, run_blocking)
        done = sender.start()
        await asyncio.sleep(0.02)
        b.close()  # the client goes away with the answer half sent
        with pytest.raises(OSError):
            await asyncio.wait_for(done, 10)
        assert sender._fds == []
        send_socket.close()

    uvloop.run(main())
    a.close()


def test_large_fetch_through_the_handler_path_with_an_authorizer(broker_factory: Any) -> None:
    """With an authorizer, Fetch goes through ``handle`` (not the at-once path): its large
    answer is sent from the file too, not turned into an error."""
    broker = broker_factory(
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        }
    )
    topic = f"acl-sendfile-{uuid.uuid4().hex[:8]}"
    values = _values(11)[:4]
    with WireClient(broker.bootstrap) as c:
        assert create(c, topic).error_code == 0
        for batch in values:
            assert produce(c, topic, make_batch(batch)).error_code == 0
        p = c.request(fetch_request(topic, 0, max_bytes=4 << 20)).responses[0].partitions[0]
    assert p.error_code == 0
    assert len(p.records) >= SENDFILE_MIN_BYTES
    assert p.records == _segment_bytes(broker, topic)
