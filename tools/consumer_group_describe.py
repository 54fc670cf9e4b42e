"""ConsumerGroupDescribe (KIP-848) for ``tidelog groups --describe``: one raw request.

kafka-python speaks only the classic group APIs, so a consumer group (``group.protocol=consumer``)
is described with one ConsumerGroupDescribe v0 request over a socket to the bootstrap server
(tidelog is one node: it is the coordinator of every group). Returns None when the broker does
not know the group as a consumer group.
"""

from __future__ import annotations

import io
import socket
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader, entity_writer

from tidelog.protocol import codec
from tidelog.protocol.schema import request_types

API_KEY, VERSION = 69, 0
_CORRELATION_ID = 848
_MAX_ANSWER_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]
    target: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[DescribedMember, ...]


def _read_exact(sock: socket.socket, n: int) -> bytes:
    parts = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def describe(
    bootstrap: str, group_id: str, timeout_s: float = 30.0
) -> DescribedConsumerGroup | None:
    host, port = bootstrap.split(",")[0].strip().rsplit(":", 1)
    types = request_types(API_KEY, VERSION)
    request = types.ConsumerGroupDescribeRequest(
        group_ids=(group_id,), include_authorized_operations=False
    )
    header = struct.pack(">hhih", API_KEY, VERSION, _CORRELATION_ID, len(b"tidelog-groups"))
    header += b"tidelog-groups\x00"  # request header v2: empty tagged fields
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    payload = header + body.getvalue()
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _read_exact(sock, 4))
        if not 0 < size <= _MAX_ANSWER_BYTES:
            raise ConnectionError(f"answer of {size} bytes")
        frame = _read_exact(sock, size)
    offset = 4 + (1 if codec.response_header_version(API_KEY, VERSION) == 1 else 0)
    response: Any
    response, _ = entity_reader(codec.response_schema(API_KEY, VERSION))(frame, offset)
    (group,) = response.groups
    if group.error_code != 0:
        return None

    def pairs(assignment: object) -> tuple[tuple[str, int], ...]:
        return tuple(
            sorted(
                (t.topic_name, int(p))
                for t in getattr(assignment, "topic_partitions", ())
                for p in t.partitions
            )
        )

    return DescribedConsumerGroup(
        group.group_id,
        group.group_state,
        int(group.group_epoch),
        int(group.assignment_epoch),
        group.assignor_name,
        tuple(
            DescribedMember(
                m.member_id,
                m.instance_id,
                int(m.member_epoch),
                m.client_id,
                m.client_host,
                pairs(m.assignment),
                pairs(m.target_assignment),
            )
            for m in group.members
        ),
    )
