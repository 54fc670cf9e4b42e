"""Builders for segment files in Kafka's formats, for the offline tool tests.

v2 batches come from ``storage.record_codec.encode_batch``; legacy v0/v1 messages are built here
from the format (offset i64, size i32, crc u32, magic i8, attributes i8, [timestamp i64], key,
value), wrappers compressed with ``storage.record_codec.compress``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tidelog.storage.record_codec import compress


@dataclass(frozen=True, slots=True)
class ToolRun:
    """What one in-process ``tidelog`` run returned and printed."""

    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


RunTool = Callable[..., ToolRun]


def legacy_message(
    magic: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: int = -1,
    attributes: int = 0,
) -> bytes:
    """One v0/v1 message with its 12-byte log overhead."""
    body = bytes([magic, attributes])
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def legacy_wrapper(
    magic: int,
    codec: int,
    last_offset: int,
    records: Sequence[tuple[bytes | None, bytes | None, int]],
    wrapper_timestamp: int | None = None,
    log_append_time: bool = False,
) -> bytes:
    """A compressed wrapper holding ``records`` (key, value, timestamp), as a broker stores it:
    v0 inner offsets absolute, v1 inner offsets relative (0..n-1), wrapper offset = last."""
    n = len(records)
    inner = b"".join(
        legacy_message(
            magic,
            (last_offset - n + 1 + i) if magic == 0 else i,
            key,
            value,
            ts,
        )
        for i, (key, value, ts) in enumerate(records)
    )
    attrs = codec | (0x08 if log_append_time else 0)
    ts = wrapper_timestamp if wrapper_timestamp is not None else max(r[2] for r in records)
    return legacy_message(magic, last_offset, None, compress(codec, inner), ts, attrs)


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def offset_index(base: int, entries: Sequence[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">ii", off - base, pos) for off, pos in entries)


def time_index(base: int, entries: Sequence[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">qi", ts, off - base) for ts, off in entries)


def txn_index(entries: Sequence[tuple[int, int, int, int]]) -> bytes:
    return b"".join(struct.pack(">hqqqq", 0, *e) for e in entries)
