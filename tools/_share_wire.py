"""One-connection raw requests for ``tidelog share-groups`` (kafka-python has no share APIs).

tidelog is one node, the coordinator of every group: the requests go to the first bootstrap
server. Each request is a kio request of the version named; the answer is its kio response.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from tidelog.protocol import codec

__all__ = ("WireSession",)

_MAX_ANSWER_BYTES = 64 * 1024 * 1024
_CLIENT_ID = b"tidelog-share-groups"


class WireSession:
    def __init__(self, bootstrap: str, timeout_s: float = 30.0) -> None:
        host, port = bootstrap.split(",")[0].strip().rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self._correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, request: Any) -> Any:
        api_key = int(type(request).__api_key__)
        version = int(type(request).__version__)
        self._correlation_id += 1
        header = struct.pack(">hhih", api_key, version, self._correlation_id, len(_CLIENT_ID))
        header += _CLIENT_ID
        if codec.request_header_version(api_key, version) >= 2:
            header += b"\x00"  # empty tagged fields
        body = io.BytesIO()
        entity_writer(type(request))(body, request)
        payload = header + body.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._read_exact(4))
        if not 0 < size <= _MAX_ANSWER_BYTES:
            raise ConnectionError(f"answer of {size} bytes")
        frame = self._read_exact(size)
        offset = 4 + (1 if codec.response_header_version(api_key, version) == 1 else 0)
        response, _ = entity_reader(codec.response_schema(api_key, version))(frame, offset)
        return response

    def _read_exact(self, n: int) -> bytes:
        parts = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)
