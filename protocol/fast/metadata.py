"""MetadataResponse v0-13 body encoder for a single-node cluster: the bytes kio's writer writes.

kio's writer builds and walks one dataclass per partition; a full-cluster answer for 20 topics of
1,000 partitions spent ~270 ms there. On one node every partition of a topic reads the same but
for its index, so the encoded partition array depends only on the version's shape, the
partition count, the leader and its epoch: it is encoded once (``partition_array``, kept in a
cache bounded by size, ``ARRAY_CACHE_BYTES``) and shared by every topic with that count, and
nothing needs invalidating when topics change (a topic with partitions added has a new count,
so a new key; a deleted topic's array ages out). ``encode_metadata_body`` returns
chunks (``RawBody``); shared arrays of 4 KiB or more are never copied into the answer.

Byte layout (big-endian; "flexible" = v9+, where arrays and strings carry an unsigned varint
length + 1 (0 = null) instead of int32 / int16 lengths (-1 = null), and every struct, the body
included, ends with an empty tagged-field section, one 0x00 byte)::

    body      := [throttle_time_ms int32 (v3+)]
                 brokers: array of broker
                 [cluster_id nullable string (v2+)]
                 [controller_id int32 (v1+)]
                 topics: array of topic
                 [cluster_authorized_operations int32 (v8-10)]
                 [error_code int16 (v13+)]
    broker    := node_id int32, host string, port int32, [rack nullable string (v1+)]
    topic     := error_code int16
                 name string (nullable from v12: null for an unknown topic id)
                 [topic_id uuid, 16 bytes (v10+)]
                 [is_internal bool, 1 byte (v1+)]
                 partitions: array of partition
                 [topic_authorized_operations int32 (v8+)]
    partition := error_code int16 (0), partition_index int32, leader_id int32,
                 [leader_epoch int32 (v7+)]
                 replica_nodes: array of int32 (the leader alone)
                 isr_nodes: array of int32 (the leader alone)
                 [offline_replicas: array of int32 (v5+, empty)]

Authorized-operation fields hold -2147483648 when not asked for. The response header (v1 with a
tagged-field section from v9) is written by the router, as for every ``RawBody``.
"""

from __future__ import annotations

import struct
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from tidelog.protocol.fast.common import array_len, nullable_string

__all__ = (
    "ARRAY_CACHE_BYTES",
    "UNSET_OPERATIONS",
    "MetadataBroker",
    "MetadataTopic",
    "cached_array_bytes",
    "clear_partition_arrays",
    "encode_metadata_body",
    "partition_array",
)

#: The authorized-operations value of a field the request did not ask for (Kafka's INT32_MIN).
UNSET_OPERATIONS = -(2**31)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_INDEX = struct.Struct(">hi")  # error code, partition index
_ZERO_UUID = bytes(16)
#: Partition arrays shorter than this are copied into the answer (fewer, larger chunks for
#: many small topics); longer ones are chunks of their own.
_INLINE_BELOW = 4096
#: Each array length kio writes for a one-element / empty array, by flexibility.
_ONE = {False: _I32.pack(1), True: b"\x02"}
_EMPTY = {False: _I32.pack(0), True: b"\x01"}


class MetadataBroker(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


class MetadataTopic(NamedTuple):
    """One topic of the answer: ``partition_count`` partitions, all led by ``leader_id`` at
    ``leader_epoch`` (an error entry has none)."""

    name: str | None
    topic_id: uuid.UUID | None
    is_internal: bool
    partition_count: int
    leader_id: int
    leader_epoch: int = 0
    authorized_operations: int = UNSET_OPERATIONS
    error_code: int = 0


def _shape(version: int) -> int:
    """The partition layout of ``version``: 0 (v0-4), 5 (v5-6: offline replicas), 7 (v7-8:
    leader epoch) or 9 (v9+: flexible)."""
    if version >= 9:
        return 9
    if version >= 7:
        return 7
    return 5 if version >= 5 else 0


def partition_array(version: int, count: int, leader_id: int, leader_epoch: int) -> bytes:
    """The encoded ``partitions`` array (length included) of a topic of ``count`` partitions."""
    return _partition_array(_shape(version), count, leader_id, leader_epoch)


#: Encoded partition arrays, least recently used first, and their total size: at most
#: ``ARRAY_CACHE_BYTES`` are kept (20,000 partitions of one version take ~0.5-0.7 MB), so many
#: distinct counts never thrash it and old ones (deleted topics) are dropped in time. A lock:
#: brokers embedded in one process may answer from several threads' loops.
ARRAY_CACHE_BYTES = 64 * 1024 * 1024
_arrays: OrderedDict[tuple[int, int, int, int], bytes] = OrderedDict()
_arrays_size = 0
_arrays_lock = threading.Lock()


def clear_partition_arrays() -> None:
    """Forget every encoded array (benchmarks time the first answer with this)."""
    global _arrays_size
    with _arrays_lock:
        _arrays.clear()
        _arrays_size = 0


def cached_array_bytes() -> int:
    """The total size of the encoded arrays kept."""
    return _arrays_size


def _partition_array(shape: int, count: int, leader_id: int, leader_epoch: int) -> bytes:
    global _arrays_size
    key = (shape, count, leader_id, leader_epoch)
    with _arrays_lock:
        data = _arrays.get(key)
        if data is not None:
            _arrays.move_to_end(key)
            return data
    data = _encode_partition_array(shape, count, leader_id, leader_epoch)
    with _arrays_lock:
        if key not in _arrays:
            _arrays[key] = data
            _arrays_size += len(data)
        while _arrays_size > ARRAY_CACHE_BYTES and len(_arrays) > 1:
            _arrays_size -= len(_arrays.popitem(last=False)[1])
    return data


def _encode_partition_array(shape: int, count: int, leader_id: int, leader_epoch: int) -> bytes:
    flexible = shape >= 9
    leader = _I32.pack(leader_id)
    tail = _I32.pack(leader_id)
    if shape >= 7:
        tail += _I32.pack(leader_epoch)
    tail += _ONE[flexible] + leader + _ONE[flexible] + leader
    if shape >= 5:
        tail += _EMPTY[flexible]
    if flexible:
        tail += b"\x00"
    pack = _INDEX.pack
    return array_len(count, flexible) + b"".join([pack(0, i) + tail for i in range(count)])


def _topic_head(version: int, topic: MetadataTopic) -> bytes:
    flexible = version >= 9
    out = _I16.pack(topic.error_code) + nullable_string(topic.name, flexible)
    if version >= 10:
        out += _ZERO_UUID if topic.topic_id is None else topic.topic_id.bytes
    if version >= 1:
        out += b"\x01" if topic.is_internal else b"\x00"
    return out


def _topic_tail(version: int, topic: MetadataTopic) -> bytes:
    out = _I32.pack(topic.authorized_operations) if version >= 8 else b""
    return out + b"\x00" if version >= 9 else out


def _brokers(version: int, brokers: Sequence[MetadataBroker]) -> bytes:
    flexible = version >= 9
    out = bytearray(array_len(len(brokers), flexible))
    for broker in brokers:
        out += _I32.pack(broker.node_id) + nullable_string(broker.host, flexible)
        out += _I32.pack(broker.port)
        if version >= 1:
            out += nullable_string(broker.rack, flexible)
        if flexible:
            out += b"\x00"
    return bytes(out)


def encode_metadata_body(
    version: int,
    brokers: Sequence[MetadataBroker],
    cluster_id: str | None,
    controller_id: int,
    topics: Sequence[MetadataTopic],
    *,
    cluster_authorized_operations: int = UNSET_OPERATIONS,
    error_code: int = 0,
    throttle_time_ms: int = 0,
) -> list[bytes]:
    """The MetadataResponse body (no header) of ``version`` (0-13) as chunks, laid out as the
    module docstring says. Fields a version lacks are left out."""
    if not 0 <= version <= 13:
        raise ValueError(f"MetadataResponse v{version} is not encoded here (v0-13)")
    flexible = version >= 9
    out = bytearray(_I32.pack(throttle_time_ms) if version >= 3 else b"")
    out += _brokers(version, brokers)
    if version >= 2:
        out += nullable_string(cluster_id, flexible)
    if version >= 1:
        out += _I32.pack(controller_id)
    out += array_len(len(topics), flexible)
    chunks: list[bytes] = []
    shape = _shape(version)
    for topic in topics:
        out += _topic_head(version, topic)
        if topic.partition_count:
            array = _partition_array(
                shape, topic.partition_count, topic.leader_id, topic.leader_epoch
            )
            if len(array) < _INLINE_BELOW:
                out += array
            else:  # a chunk of its own, not copied
                chunks.append(bytes(out))
                chunks.append(array)
                out = bytearray()
        else:
            out += _EMPTY[flexible]
        out += _topic_tail(version, topic)
    if 8 <= version <= 10:
        out += _I32.pack(cluster_authorized_operations)
    if version >= 13:
        out += _I16.pack(error_code)
    if flexible:
        out += b"\x00"
    chunks.append(bytes(out))
    return chunks
