"""KafkaConnection (broker/server.py), the asyncio adapter of a KafkaChannel, without a socket.

A started Broker on a real event loop, its real ListenerServer, router and handlers; requests are
real frames fed to ``data_received``. The only stand-in is the transport: ``Transport`` below is a
test double of asyncio's transport that records what the connection writes, whether it reads,
and whether it closed. Ordering, pipelining, backpressure, mutes, the file-answer fallback and
close-after-error are checked on what was written.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_client_quotas.v1 import request as acq1
from kio.schema.api_versions.v0 import request as av0

from tests.support.fault_wire import fetch_request
from tests.support.kafka_wire import encode_request, make_batch, produce_request
from tidelog.broker.app import Broker
from tidelog.broker.kafka_channel import MAX_IN_FLIGHT
from tidelog.broker.sendfile import SENDFILE_MIN_BYTES
from tidelog.broker.server import KafkaConnection
from tidelog.config import load_broker_config


class Transport:
    """Records what the connection does to its transport (no socket behind it)."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading = True
        self.pauses = 0
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.written.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        assert not self.closed
        self.written.append(b"".join(bytes(c) for c in chunks))

    def pause_reading(self) -> None:
        assert self.reading
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        assert not self.reading
        self.reading = True

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def frames(self) -> list[bytes]:
        """The answers written so far, each without its size prefix; checks the framing."""
        data = b"".join(self.written)
        out = []
        while data:
            (size,) = struct.unpack_from(">i", data)
            assert len(data) >= 4 + size, "a partial answer was written"
            out.append(data[4 : 4 + size])
            data = data[4 + size :]
        return out

    def correlation_ids(self) -> list[int]:
        return [struct.unpack_from(">i", f)[0] for f in self.frames()]


def api_versions(correlation_id: int) -> bytes:
    return encode_request(av0.ApiVersionsRequest(), correlation_id)


def fetch(correlation_id: int, topic: str, offset: int, max_wait_ms: int) -> bytes:
    request = fetch_request(topic, offset, max_wait_ms=max_wait_ms, max_bytes=4 << 20)
    return encode_request(request, correlation_id)


def produce(correlation_id: int, topic: str, records: bytes, acks: int = 1) -> bytes:
    return encode_request(
        produce_request(topic, records, acks=acks, timeout_ms=30_000), correlation_id
    )


def producer_byte_rate(correlation_id: int, rate: float) -> bytes:
    request = acq1.AlterClientQuotasRequest(
        entries=(
            acq1.EntryData(
                entity=(acq1.EntityData(entity_type="client-id", entity_name=None),),
                ops=(acq1.OpData(key="producer_byte_rate", value=rate, remove=False),),
            ),
        ),
        validate_only=False,
    )
    return encode_request(request, correlation_id)


def append(broker: Broker, batch: bytes) -> None:
    """Append ``batch`` to ``t`` (page-cache acks: the high watermark follows) and wake the
    long polls waiting on it."""
    log = broker.topics.get_log("t", 0)
    high_watermark = log.high_watermark
    log.append(batch)
    broker.log_flusher.after_append(log, high_watermark)


async def until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Let the loop run until ``condition()`` holds (fails after ``timeout_s``)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


Body = Callable[[Broker, Callable[[], tuple[KafkaConnection, Transport]]], Awaitable[None]]


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Callable[[Body], None]]:
    """Run ``body(broker, connect)`` with a started broker (topic ``t``, page-cache acks;
    ``d``, durable acks) and ``connect()`` making a connection of its listener."""
    errors: list[dict[str, Any]] = []

    def runner(body: Body) -> None:
        async def main() -> None:
            asyncio.get_running_loop().set_exception_handler(lambda _, ctx: errors.append(ctx))
            cfg = load_broker_config(
                None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"], environ={}
            )
            broker = Broker(cfg)
            await broker.start()
            connections: list[KafkaConnection] = []

            def connect() -> tuple[KafkaConnection, Transport]:
                connection = KafkaConnection(broker.listeners[0])
                transport = Transport()
                connection.connection_made(transport)  # type: ignore[arg-type]
                connections.append(connection)
                return connection, transport

            try:
                broker.topics.create_topic("t", 1, {"flush.messages": "9223372036854775807"})
                broker.topics.create_topic("d", 1, {})
                await body(broker, connect)
            finally:
                for connection in connections:
                    connection.connection_lost(None)
                await broker.stop()

        asyncio.run(main())
        assert errors == [], errors  # nothing left failing on the loop

    yield runner


def test_pipelined_answers_go_out_in_request_order_when_a_later_one_is_ready_first(
    run: Callable[[Body], None],
) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        connection, transport = connect()
        # One read: a long poll (answered later), then two requests answered at once.
        connection.data_received(fetch(1, "t", 0, 10_000) + api_versions(2) + api_versions(3))
        assert transport.written == []  # ready, but behind the long poll
        assert connection.channel.in_flight == 3
        append(broker, make_batch([b"a"]))
        await until(lambda: len(transport.frames()) == 3)
        assert transport.correlation_ids() == [1, 2, 3]
        assert connection.channel.drained and transport.reading and not transport.closed

    run(body)


def test_the_answers_ready_at_once_in_one_read_go_out_together(
    run: Callable[[Body], None],
) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        connection, transport = connect()
        batch = make_batch([b"v"])
        # The first answer goes at once, the ones behind it in that read together.
        connection.data_received(
            api_versions(1) + produce(2, "t", batch) + api_versions(3) + api_versions(4)
        )
        assert transport.correlation_ids() == [1, 2, 3, 4]
        assert len(transport.written) == 2
        connection.data_received(api_versions(5))
        assert transport.correlation_ids() == [1, 2, 3, 4, 5] and len(transport.written) == 3
        # A malformed frame after them in the same read: they are written, then it closes.
        closing, closing_transport = connect()
        closing.data_received(api_versions(6) + api_versions(7) + struct.pack(">i", -1))
        assert closing_transport.correlation_ids() == [6, 7] and closing_transport.closed

    run(body)


def test_a_full_write_buffer_stops_reading_until_it_drains(run: Callable[[Body], None]) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        connection, transport = connect()
        connection.data_received(api_versions(1))
        assert transport.correlation_ids() == [1]
        connection.pause_writing()
        assert not transport.reading
        # Bytes already in flight when reading paused: held, not dispatched.
        connection.data_received(api_versions(2) + api_versions(3))
        assert transport.correlation_ids() == [1]
        connection.resume_writing()
        assert transport.reading
        assert transport.correlation_ids() == [1, 2, 3]

    run(body)


def test_max_in_flight_stops_reading_until_answers_catch_up(run: Callable[[Body], None]) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        connection, transport = connect()
        extra = 3
        frames = fetch(0, "t", 0, 10_000) + b"".join(
            api_versions(i) for i in range(1, MAX_IN_FLIGHT + extra)
        )
        connection.data_received(frames)
        assert connection.channel.in_flight == MAX_IN_FLIGHT
        assert not transport.reading and transport.written == []
        append(broker, make_batch([b"a"]))
        await until(lambda: len(transport.frames()) == MAX_IN_FLIGHT + extra)
        assert transport.correlation_ids() == list(range(MAX_IN_FLIGHT + extra))
        assert transport.reading and transport.pauses == 1

    run(body)


def test_a_malformed_frame_closes_that_connection_only(
    run: Callable[[Body], None], caplog: pytest.LogCaptureFixture
) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        bad, bad_transport = connect()
        good, good_transport = connect()
        # An answer owed before the bad frame is dropped with the connection.
        bad.data_received(fetch(1, "t", 0, 10_000) + struct.pack(">i", -5) + api_versions(2))
        assert bad_transport.closed and bad_transport.written == []
        assert broker.partitions.waiting() == 1  # until the transport reports the loss
        bad.connection_lost(None)
        await until(lambda: broker.partitions.waiting() == 0)  # its long poll was cancelled
        assert "request size -5 is outside 0.." in caplog.text
        # A frame that is too short for a request header: its own connection closes too.
        short, short_transport = connect()
        short.data_received(struct.pack(">ih", 2, 18))
        assert short_transport.closed and short_transport.written == []
        good.data_received(api_versions(7))
        assert good_transport.correlation_ids() == [7] and not good_transport.closed
        assert len(broker.listeners[0].connections) == 2  # short's loss not reported yet

    run(body)


def test_a_throttled_answer_mutes_the_connection_for_its_throttle_time(
    run: Callable[[Body], None],
) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        connection, transport = connect()
        connection.data_received(producer_byte_rate(1, 2600.0))
        await until(lambda: transport.correlation_ids() == [1])
        # About 11.5 s of quota in one request; over a quota window of 10-11 s: a throttle
        # time of 0.5-1.5 s (Kafka's formula), in the answer's last int32 before its tags.
        batch = make_batch([b"x" * 30_000])
        connection.data_received(api_versions(2) + produce(3, "t", batch))
        await until(lambda: len(transport.frames()) == 3)
        answer = transport.frames()[2]
        throttle_ms = struct.unpack_from(">i", answer, len(answer) - 5)[0]
        assert 0 < throttle_ms < 3000
        assert not transport.reading  # muted (KIP-219)
        started = asyncio.get_running_loop().time()
        connection.data_received(api_versions(4))  # read before the pause took: held
        assert len(transport.frames()) == 3
        await until(lambda: transport.reading, timeout_s=throttle_ms / 1000 + 5)
        assert asyncio.get_running_loop().time() - started >= throttle_ms / 1000 - 0.05
        assert transport.correlation_ids() == [1, 2, 3, 4]

    run(body)


def test_a_file_answer_without_a_socket_is_read_and_written_in_order(
    run: Callable[[Body], None],
) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        batch = make_batch([bytes(range(256)) * (SENDFILE_MIN_BYTES // 256 + 16)])
        append(broker, batch)
        connection, transport = connect()
        # No socket in the transport: the regions are read (in a worker thread, being large)
        # and written; the answer behind it waits for it.
        connection.data_received(fetch(1, "t", 0, 0) + api_versions(2))
        assert connection.channel.sending_file
        await until(lambda: len(transport.frames()) == 2)
        assert transport.correlation_ids() == [1, 2]
        assert batch in transport.frames()[0]
        assert connection.channel.drained

    run(body)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings the connection logged; the loop-stall watchdog (``tidelog.loop``) reports how
    busy the machine is, not what the connection did, so it is left out."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name != "tidelog.loop"
    ]


def test_connection_lost_with_answers_owed_cancels_them_quietly(
    run: Callable[[Body], None], caplog: pytest.LogCaptureFixture
) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        connection, transport = connect()
        connection.data_received(
            fetch(1, "t", 0, 10_000)  # a long poll (a future answered by callbacks)
            + produce(2, "d", make_batch([b"durable"]), acks=-1)  # waits for its fsync
            + api_versions(3)
        )
        assert connection.channel.in_flight == 3 and broker.partitions.waiting() == 1
        with caplog.at_level(logging.WARNING, logger="tidelog"):
            connection.connection_lost(ConnectionResetError("peer gone"))
            # The append goes on (the request was taken); its fsync completes after the loss.
            await until(lambda: broker.topics.get_log("d", 0).high_watermark == 1)
            await until(lambda: broker.partitions.waiting() == 0)
        assert broker.partitions.waiting() == 0
        assert connection.channel.in_flight == 0
        assert transport.written == []
        assert connection not in broker.listeners[0].connections
        assert _warnings(caplog) == []

    run(body)


def test_a_request_that_fails_closes_after_the_answers_owed_before_it(
    run: Callable[[Body], None], caplog: pytest.LogCaptureFixture
) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        connection, transport = connect()
        unknown_api = struct.pack(">ihhih", 10, 999, 0, 2, 0)  # API key 999, client id ""
        connection.data_received(fetch(1, "t", 0, 10_000) + unknown_api + api_versions(3))
        assert transport.written == [] and not transport.closed  # the close waits its turn
        append(broker, make_batch([b"a"]))
        await until(lambda: transport.closed)
        assert transport.correlation_ids() == [1]  # then nothing more
        assert "unknown API key 999" in caplog.text

    run(body)


def test_the_answers_owed_at_the_end_of_stream_are_written_then_it_closes(
    run: Callable[[Body], None],
) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        connection, transport = connect()
        connection.data_received(fetch(1, "t", 0, 10_000) + api_versions(2))
        assert connection.eof_received() is True  # keep the transport open to answer
        connection.data_received(api_versions(3))  # after the end: ignored
        assert not transport.closed and transport.written == []
        append(broker, make_batch([b"a"]))
        await until(lambda: transport.closed)
        assert transport.correlation_ids() == [1, 2]

    run(body)


def test_connection_lost_while_a_file_answer_is_read_stops_it_quietly(
    run: Callable[[Body], None], caplog: pytest.LogCaptureFixture
) -> None:
    async def body(broker: Broker, connect: Any) -> None:
        append(broker, make_batch([b"y" * (SENDFILE_MIN_BYTES + 4096)]))
        connection, transport = connect()
        connection.data_received(fetch(1, "t", 0, 0) + api_versions(2))
        assert connection.channel.sending_file
        connection.connection_lost(None)

        def sending() -> list[asyncio.Task[Any]]:
            return [t for t in asyncio.all_tasks() if "write_read" in repr(t.get_coro())]

        await until(lambda: not sending())
        assert transport.written == []
        assert _warnings(caplog) == []

    run(body)
