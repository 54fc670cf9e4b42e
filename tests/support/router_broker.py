"""A real broker in this process, spoken to in encoded frames through its router (no socket).

Requests are encoded with kio's writer for the exact version, the broker's router decodes and
dispatches them (decode, handler, encode), and the framed answer is decoded with kio's reader of
that version, so a test sees what a client would read, for versions no installed client sends.

``RouterBroker`` is the one harness; ``WireBroker`` (group-protocol tests: three offsets
partitions, short rebalance delays) and ``AdminHarness`` (admin API tests: one offsets
partition) only choose its default settings.
"""

from __future__ import annotations

import asyncio
import io
import struct
from pathlib import Path
from typing import Any

from kio.serial import entity_reader, entity_writer

from tidelog.broker.app import Broker
from tidelog.config import load_broker_config
from tidelog.protocol import codec
from tidelog.protocol.schema import build, request_types
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord

__all__ = ("AdminHarness", "RouterBroker", "WireBroker")


class RouterBroker:
    """A started ``Broker`` on its own event loop; ``overrides`` come after the defaults."""

    client_id = b"wire-test"

    def __init__(self, log_dir: Path, *overrides: str) -> None:
        self.log_dir = log_dir
        self.loop = asyncio.new_event_loop()
        self.overrides = (f"log.dirs={log_dir}", "listeners=PLAINTEXT://127.0.0.1:0", *overrides)
        self.broker = self._start()
        self._correlation = 0

    def _start(self) -> Broker:
        broker = Broker(load_broker_config(overrides=self.overrides))
        self.loop.run_until_complete(broker.start())
        return broker

    def restart(self) -> None:
        self.loop.run_until_complete(self.broker.stop())
        self.broker = self._start()

    def close_broker(self) -> None:
        self.loop.run_until_complete(self.broker.stop())

    def close(self) -> None:
        self.close_broker()
        self.loop.close()

    # ------------------------------------------------------------------ requests

    def types(self, api_key: int, version: int) -> Any:
        """The kio request module of that version."""
        return request_types(api_key, version)

    def request(self, api_key: int, version: int, cls_name: str, /, **fields: Any) -> Any:
        """``cls_name`` of that request version, from the fields it has (others dropped)."""
        return build(getattr(request_types(api_key, version), cls_name), **fields)

    nested = request

    def send(self, api_key: int, version: int, request: Any) -> Any:
        """Dispatch one encoded request; the router's outcome (maybe a coroutine)."""
        self._correlation += 1
        header = struct.pack(">hhih", api_key, version, self._correlation, len(self.client_id))
        header += self.client_id
        if codec.request_header_version(api_key, version) >= 2:
            header += b"\x00"
        body = io.BytesIO()
        entity_writer(type(request))(body, request)
        return self.broker.router.dispatch(header + body.getvalue(), "127.0.0.1", 1)

    def decode(self, api_key: int, version: int, outcome: Any) -> Any:
        """The response in a framed answer (size, correlation id, header, body)."""
        assert isinstance(outcome, bytes), f"expected an answer, got {outcome!r}"
        (size,) = struct.unpack_from(">i", outcome, 0)
        assert size == len(outcome) - 4, "the size prefix does not match the answer"
        offset = 8 + (1 if codec.response_header_version(api_key, version) == 1 else 0)
        response, consumed = entity_reader(codec.response_schema(api_key, version))(outcome, offset)
        assert offset + consumed == len(outcome), "trailing bytes after the response"
        return response

    def call(self, api_key: int, version: int, request: Any) -> Any:
        """Send ``request`` as API ``api_key`` v``version``; the decoded response."""
        outcome = self.send(api_key, version, request)
        correlation = self._correlation
        if asyncio.iscoroutine(outcome):
            outcome = self.loop.run_until_complete(outcome)
        if isinstance(outcome, list):  # a large pre-encoded answer comes as chunks
            outcome = b"".join(bytes(chunk) for chunk in outcome)
        assert isinstance(outcome, bytes), f"expected an answer, got {outcome!r}"
        (got,) = struct.unpack_from(">i", outcome, 4)
        assert got == correlation, f"answer to correlation id {got}, expected {correlation}"
        return self.decode(api_key, version, outcome)

    def sleep(self, seconds: float) -> None:
        self.loop.run_until_complete(asyncio.sleep(seconds))

    # ------------------------------------------------------------------ data, without the wire

    def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        """``retention_ms="1"`` is the topic setting ``retention.ms``."""
        self.broker.topics.create_topic(
            name, partitions, {k.replace("_", "."): v for k, v in configs.items()}
        )

    def produce(self, topic: str, partition: int, count: int) -> None:
        log = self.broker.topics.get_log(topic, partition)
        assert log is not None
        records = [NewRecord(key=None, value=b"v%d" % i) for i in range(count)]
        log.append(encode_batch(records))
        log.flush()  # the durable default (flush.messages=1) moves the HW after the fsync


class WireBroker(RouterBroker):
    """The group-protocol tests' broker: three offsets partitions, short group delays."""

    def __init__(self, log_dir: Path, *overrides: str) -> None:
        super().__init__(
            log_dir,
            "offsets.topic.num.partitions=3",
            "group.initial.rebalance.delay.ms=20",
            "group.min.session.timeout.ms=100",
            *overrides,
        )


class AdminHarness(RouterBroker):
    """The admin API tests' broker: one offsets partition."""

    client_id = b"admin-test"

    def __init__(self, log_dir: Path, overrides: tuple[str, ...] = ()) -> None:
        super().__init__(log_dir, "offsets.topic.num.partitions=1", *overrides)
