"""A real broker in this process, driven through its router with encoded request frames.

Each call encodes a kio request with its header, hands the frame to ``Router.dispatch`` (decode,
handler, encode), and decodes the framed answer with kio's reader for that response version, so
a test sees exactly what a client would read. No socket is involved.
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
from tidelog.protocol.schema import request_types
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord


class AdminHarness:
    def __init__(self, log_dir: Path, overrides: tuple[str, ...] = ()) -> None:
        self.log_dir = log_dir
        self.overrides = (
            f"log.dirs={log_dir}",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "offsets.topic.num.partitions=1",
            *overrides,
        )
        self.loop = asyncio.new_event_loop()
        self.broker = self._start()
        self._correlation = 0

    def _start(self) -> Broker:
        broker = Broker(load_broker_config(overrides=self.overrides))
        self.loop.run_until_complete(broker.start())
        return broker

    def restart(self) -> None:
        self.loop.run_until_complete(self.broker.stop())
        self.broker = self._start()

    def close(self) -> None:
        self.loop.run_until_complete(self.broker.stop())
        self.loop.close()

    def types(self, api_key: int, version: int) -> Any:
        return request_types(api_key, version)

    def call(self, api_key: int, version: int, request: Any) -> Any:
        """Send ``request`` as API ``api_key`` v``version``; the decoded response."""
        self._correlation += 1
        header_version = codec.request_header_version(api_key, version)
        client_id = b"admin-test"
        header = (
            struct.pack(">hhih", api_key, version, self._correlation, len(client_id)) + client_id
        )
        if header_version >= 2:
            header += b"\x00"
        body = io.BytesIO()
        entity_writer(type(request))(body, request)
        outcome = self.broker.router.dispatch(header + body.getvalue(), "127.0.0.1", 1)
        if asyncio.iscoroutine(outcome):
            outcome = self.loop.run_until_complete(outcome)
        assert isinstance(outcome, bytes), f"expected an answer, got {outcome!r}"
        (size,) = struct.unpack_from(">i", outcome, 0)
        assert size == len(outcome) - 4
        (correlation,) = struct.unpack_from(">i", outcome, 4)
        assert correlation == self._correlation
        offset = 8 + (1 if codec.response_header_version(api_key, version) == 1 else 0)
        schema = codec.response_schema(api_key, version)
        response, consumed = entity_reader(schema)(outcome, offset)
        assert offset + consumed == len(outcome), "trailing bytes after the response"
        return response

    # ------------------------------------------------------------------ data helpers

    def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        self.broker.topics.create_topic(
            name, partitions, {k.replace("_", "."): v for k, v in configs.items()}
        )

    def produce(self, topic: str, partition: int, count: int) -> None:
        log = self.broker.topics.get_log(topic, partition)
        assert log is not None
        records = [NewRecord(key=None, value=b"v%d" % i) for i in range(count)]
        log.append(encode_batch(records))
        log.flush()  # the durable default (flush.messages=1) moves the HW after the fsync
