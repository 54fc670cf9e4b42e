"""A tiny blocking Kafka wire client for tests: kio requests in, kio responses out.

Tests use it to send exactly the bytes they mean (raw frames, pipelined requests, odd versions)
to a real broker. Import it as ``from tests.support.kafka_wire import WireClient`` (``tests/`` is
a package; pyproject's pytest ``pythonpath`` puts the repository root on ``sys.path``).

The frame helpers (``read_exact``, ``read_frame``, ``router_frame``) are the one copy the other
test clients, proxies and harnesses use.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.produce.v9 import request as p9
from kio.serial import entity_reader, entity_writer

__all__ = (
    "WireClient",
    "encode_request",
    "make_batch",
    "produce_request",
    "read_exact",
    "read_frame",
    "router_frame",
)


def encode_request(
    request: Any, correlation_id: int, client_id: str | None = "tidelog-test"
) -> bytes:
    """Frame ``request`` (a kio request instance) with its header version and size prefix."""
    header_cls = type(request).__header_schema__
    header = header_cls(
        request_api_key=type(request).__api_key__,
        request_api_version=type(request).__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buffer = io.BytesIO()
    entity_writer(header_cls)(buffer, header)
    entity_writer(type(request))(buffer, request)
    body = buffer.getvalue()
    return struct.pack(">i", len(body)) + body


def produce_request(
    topic: str, records: bytes | None, *, partition: int = 0, acks: int = -1, timeout_ms: int = 5000
) -> Any:
    """A Produce v9 of ``records`` to one partition (no transactional id)."""
    return p9.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(
            p9.TopicProduceData(
                name=topic,
                partition_data=(p9.PartitionProduceData(index=partition, records=records),),
            ),
        ),
    )


def router_frame(request: Any, correlation_id: int, client_id: str | None = "t") -> bytes:
    """``request`` encoded as the router gets it from the server: header and body, no size."""
    return encode_request(request, correlation_id, client_id)[4:]


def read_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from ``sock``; ConnectionError when the peer closes first."""
    parts = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def read_frame(sock: socket.socket) -> bytes:
    """The next size-prefixed frame from ``sock``, without its size."""
    (size,) = struct.unpack(">i", read_exact(sock, 4))
    return read_exact(sock, size)


def make_batch(
    values: list[bytes],
    *,
    keys: list[bytes | None] | None = None,
    timestamp_ms: int = 1_700_000_000_000,
    compression: int = 0,
) -> bytes:
    """A message-format-v2 record batch (kafka-python's builder), base offset 0."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 24,
    )
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        builder.append(i, timestamp=timestamp_ms + i, key=key, value=value, headers=[])
    return bytes(builder.build())


DESCRIBE_TRANSACTIONS = 65


def read_describe_transactions_v0(frame: bytes, offset: int) -> Any:
    """DescribeTransactions v0's answer as kio's response (kio's own reader refuses the -1
    start time of an id whose transaction has not started: tidelog's reader reads the frame,
    and -1 becomes the instant 1 ms before the epoch, which ``plain``
    (tests/support/differential.py) turns back into -1)."""
    from kio.schema.describe_transactions.v0 import response as v0
    from kio.schema.errors import ErrorCode

    from tidelog.protocol.describe_transactions import read_describe_transactions_v0 as read

    (throttle_ms,) = struct.unpack_from(">i", frame, offset)
    states = tuple(
        v0.TransactionState(
            error_code=ErrorCode(e.error_code),
            transactional_id=e.transactional_id,
            transaction_state=e.transaction_state,
            transaction_timeout=datetime.timedelta(milliseconds=e.transaction_timeout_ms),
            transaction_start_time=datetime.datetime.fromtimestamp(
                e.transaction_start_ms / 1000, datetime.UTC
            ),
            producer_id=e.producer_id,
            producer_epoch=e.producer_epoch,
            topics=tuple(
                v0.TopicData(topic=topic, partitions=tuple(parts))
                for topic, parts in e.topics.items()
            ),
        )
        for e in read(frame, offset)
    )
    return v0.DescribeTransactionsResponse(
        throttle_time=datetime.timedelta(milliseconds=throttle_ms), transaction_states=states
    )


class WireClient:
    """One TCP connection to a broker."""

    def __init__(
        self, bootstrap: str, timeout: float = 10.0, client_id: str | None = "tidelog-test"
    ) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.client_id = client_id
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_id = 1
        self._sent: dict[int, tuple[int, int]] = {}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any, correlation_id: int | None = None) -> int:
        """Send without waiting; returns the correlation id."""
        cid = self._next_id if correlation_id is None else correlation_id
        self._next_id = max(self._next_id, cid) + 1
        self._sent[cid] = (int(type(request).__api_key__), int(type(request).__version__))
        self.sock.sendall(encode_request(request, cid, self.client_id))
        return cid

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def receive_frame(self) -> bytes:
        return read_frame(self.sock)

    def receive(self) -> tuple[int, Any]:
        """(correlation id, decoded response) of the next answer."""
        frame = self.receive_frame()
        (cid,) = struct.unpack_from(">i", frame, 0)
        api_key, version = self._sent.pop(cid)
        schema = load_response_schema(api_key, version)
        offset = 4
        if schema.__header_schema__.__version__ == 1:
            offset += 1  # empty tagged-field section
            assert frame[4] == 0, "response header carries tagged fields"
        if (api_key, version) == (DESCRIBE_TRANSACTIONS, 0):
            return cid, read_describe_transactions_v0(frame, offset)
        response, _ = entity_reader(schema)(frame, offset)
        return cid, response

    def request(self, request: Any) -> Any:
        cid = self.send(request)
        got, response = self.receive()
        assert got == cid, f"answer to correlation id {got}, expected {cid}"
        return response

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the broker closed the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except TimeoutError:
            return False
        except ConnectionError:
            return True
        return data == b""
