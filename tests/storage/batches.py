"""Test helper: encode valid message-format-v2 record batches (independent of storage code)."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from crc32c import crc32c

Header = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class Rec:
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[Header, ...] = ()


def zigzag_varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return zigzag_varint(-1)
    return zigzag_varint(len(data)) + data


def encode_record(offset_delta: int, timestamp_delta: int, rec: Rec) -> bytes:
    body = bytearray(b"\x00")
    body += zigzag_varint(timestamp_delta)
    body += zigzag_varint(offset_delta)
    body += _bytes_field(rec.key)
    body += _bytes_field(rec.value)
    body += zigzag_varint(len(rec.headers))
    for hkey, hvalue in rec.headers:
        body += zigzag_varint(len(hkey)) + hkey
        body += _bytes_field(hvalue)
    return zigzag_varint(len(body)) + bytes(body)


def build_batch(
    records: Sequence[Rec],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = 0,
    max_timestamp: int | None = None,
) -> bytes:
    """One batch of ``records`` (offset deltas 0..n-1)."""
    assert records
    base_ts = min(r.timestamp for r in records)
    max_ts = max(r.timestamp for r in records) if max_timestamp is None else max_timestamp
    body = b"".join(encode_record(i, r.timestamp - base_ts, r) for i, r in enumerate(records))
    if compression == 1:
        body = gzip.compress(body)
    elif compression != 0:
        raise ValueError("helper supports none and gzip only")
    attributes = compression | (timestamp_type << 3)
    if transactional:
        attributes |= 0x10
    if control:
        attributes |= 0x20
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            len(records) - 1,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + body
    )
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return (
        struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, 2, crc) + after_crc
    )


def simple_batch(
    count: int, *, timestamp: int = 1_000, value_size: int = 10, seed: int = 0
) -> bytes:
    recs = [
        Rec(
            key=f"k{seed}-{i}".encode(),
            value=bytes((seed + i + j) % 251 for j in range(value_size)),
            timestamp=timestamp + i,
        )
        for i in range(count)
    ]
    return build_batch(recs)


def batch_with_size(size: int, *, timestamp: int = 1_000, count: int = 1) -> bytes:
    """A batch of exactly ``size`` bytes (``size`` >= about 80)."""
    probe = build_batch([Rec(None, b"", timestamp)] * count)
    value_size = size - len(probe)
    for _ in range(4):  # varint widths may shift the total by a byte or two
        recs = [Rec(None, b"x" * max(value_size // count, 0), timestamp)] * count
        extra = value_size - (value_size // count) * count
        if extra:
            recs[0] = Rec(None, b"x" * (value_size // count + extra), timestamp)
        batch = build_batch(recs)
        if len(batch) == size:
            return batch
        value_size += size - len(batch)
    raise ValueError(f"cannot build a batch of {size} bytes")
