"""Raw asyncio Kafka clients for load tests: many connections, exact frames, no client library.

``Conn`` is one connection with a reader task that matches answers to correlation ids; a test
opens hundreds of them in one event loop. Requests are kio objects framed by
``kafka_wire.encode_request``; answers are decoded with kio's readers.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.api_versions.v3 import request as av3
from kio.schema.metadata.v12 import request as md12
from kio.serial import entity_reader

from tests.support.fault_wire import fetch_request
from tests.support.kafka_wire import encode_request, make_batch, produce_request

__all__ = ("Conn", "api_versions", "fetch", "metadata", "produce")


def api_versions() -> Any:
    return av3.ApiVersionsRequest(client_software_name="load", client_software_version="1")


def metadata(topics: list[str] | None) -> Any:
    return md12.MetadataRequest(
        topics=None
        if topics is None
        else tuple(md12.MetadataRequestTopic(topic_id=None, name=t) for t in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def produce(topic: str, partition: int, values: list[bytes], acks: int = -1) -> Any:
    return produce_request(
        topic, make_batch(values), partition=partition, acks=acks, timeout_ms=30_000
    )


def fetch(
    topic: str, partition: int, offset: int, max_bytes: int = 1 << 20, wait_ms: int = 0
) -> Any:
    return fetch_request(
        topic, offset, partition=partition, max_wait_ms=wait_ms, max_bytes=max_bytes
    )


class Conn:
    """One connection; ``await conn.call(request)`` sends and waits for the decoded answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._next = 0
        self._waiting: dict[int, tuple[asyncio.Future[Any], Any]] = {}
        self._task = asyncio.ensure_future(self._read_answers())

    @classmethod
    async def open(cls, bootstrap: str, source: str | None = None) -> Conn:
        host, port = bootstrap.rsplit(":", 1)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        if source is not None:
            sock.bind((source, 0))
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        reader, writer = await asyncio.open_connection(sock=sock)
        return cls(reader, writer)

    async def _read_answers(self) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await self.reader.readexactly(4))
                frame = await self.reader.readexactly(size)
                (correlation,) = struct.unpack_from(">i", frame, 0)
                future, cls = self._waiting.pop(correlation)
                offset = 5 if cls.__header_schema__.__version__ == 1 else 4
                answer, _ = entity_reader(cls)(frame, offset)
                if not future.done():
                    future.set_result(answer)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            for future, _ in self._waiting.values():
                if not future.done():
                    future.set_exception(ConnectionError(f"closed by the broker: {exc!r}"))
            self._waiting.clear()

    def send(self, request: Any) -> asyncio.Future[Any]:
        self._next += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        cls = load_response_schema(type(request).__api_key__, type(request).__version__)
        self._waiting[self._next] = (future, cls)
        if self._task.done():
            future.set_exception(ConnectionError("closed by the broker"))
        else:
            self.writer.write(encode_request(request, self._next))
        return future

    async def call(self, request: Any, timeout: float = 30.0) -> Any:
        return await asyncio.wait_for(self.send(request), timeout)

    async def closed_by_broker(self, timeout: float) -> bool:
        """True if the broker closes this connection within ``timeout`` s."""
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        self._task.cancel()
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass
