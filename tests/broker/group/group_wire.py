"""A real broker in this process, spoken to in encoded frames through its router (no socket).

Requests are encoded with kio's writer for the exact version, the broker's router decodes and
dispatches them, and the framed answer is decoded with kio's reader of that version, so a test
sees what a client would read, for versions no installed client sends.
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


class WireBroker:
    def __init__(self, log_dir: Path, *overrides: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.overrides = (
            f"log.dirs={log_dir}",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "offsets.topic.num.partitions=3",
            "group.initial.rebalance.delay.ms=20",
            "group.min.session.timeout.ms=100",
            *overrides,
        )
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

    def request(self, api_key: int, version: int, cls_name: str, /, **fields: Any) -> Any:
        """``cls_name`` of that request version, from the fields it has (others dropped)."""
        return build(getattr(request_types(api_key, version), cls_name), **fields)

    nested = request

    def send(self, api_key: int, version: int, request: Any) -> Any:
        """Dispatch one encoded request; the router's outcome (maybe a coroutine)."""
        self._correlation += 1
        client_id = b"wire-test"
        header = struct.pack(">hhih", api_key, version, self._correlation, len(client_id))
        header += client_id
        if codec.request_header_version(api_key, version) >= 2:
            header += b"\x00"
        body = io.BytesIO()
        entity_writer(type(request))(body, request)
        return self.broker.router.dispatch(header + body.getvalue(), "127.0.0.1", 1)

    def decode(self, api_key: int, version: int, outcome: Any) -> Any:
        assert isinstance(outcome, bytes), f"expected an answer, got {outcome!r}"
        offset = 8 + (1 if codec.response_header_version(api_key, version) == 1 else 0)
        response, consumed = entity_reader(codec.response_schema(api_key, version))(outcome, offset)
        assert offset + consumed == len(outcome), "trailing bytes after the response"
        return response

    def call(self, api_key: int, version: int, request: Any) -> Any:
        outcome = self.send(api_key, version, request)
        if asyncio.iscoroutine(outcome):
            outcome = self.loop.run_until_complete(outcome)
        return self.decode(api_key, version, outcome)

    def sleep(self, seconds: float) -> None:
        self.loop.run_until_complete(asyncio.sleep(seconds))
