"""Kafka record data: decode and encode message format v2 batches, decode legacy v0/v1 sets.

Written from the format spec (DefaultRecordBatch / DefaultRecord / LegacyRecord). Pure
functions, no I/O. Every length is checked against what remains before anything is
allocated; corrupt input raises `RecordDecodeError` (a `ValueError`), never anything else.

The v2 batch header (61 bytes) is specified, parsed and packed by ``storage.batch``
(``RecordBatchHeader``); varints by ``storage.varint``. A record: length varint | attributes
i8 | timestampDelta varlong | offsetDelta varint | key (varint length, -1 = null) | value
(likewise) | header count varint | headers (key string, value).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence

from tidelog.storage import checksum as _crc32c
from tidelog.storage.batch import HEADER_STRUCT, unpack_batch_header
from tidelog.storage.record_compression import compress, decompress
from tidelog.storage.record_types import (
    COMPRESSION_CODES,
    COMPRESSION_NAMES,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_UNCOMPRESSED,
    DecodedBatch,
    LegacyBatch,
    NewRecord,
    Record,
    RecordBatchHeader,
    RecordColumns,
    RecordDecodeError,
)
from tidelog.storage.varint import VarintError, read_uvarint, read_varint, write_varint

__all__ = [
    "COMPRESSION_CODES",
    "COMPRESSION_NAMES",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAX_UNCOMPRESSED",
    "DecodedBatch",
    "LegacyBatch",
    "NewRecord",
    "Record",
    "RecordBatchHeader",
    "RecordColumns",
    "RecordDecodeError",
    "batch_records_bytes",
    "compress",
    "control_marker",
    "decode_batch",
    "decode_batch_into",
    "decode_headers",
    "decode_legacy_entry",
    "legacy_inner_crc_checks",
    "legacy_message_header",
    "decompress",
    "encode_batch",
    "encode_control_batch",
    "iter_batches",
    "iter_records",
    "read_batch_header",
]

_LEGACY_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_LEGACY_V1 = struct.Struct(">qiIbbq")  # ... timestamp
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_MIN_RECORD_SIZE = 7  # length, attributes, ts delta, offset delta, key len, value len, headers


# ---------------------------------------------------------------- v2 decoding


def read_batch_header(buf: bytes | memoryview, pos: int = 0) -> RecordBatchHeader:
    """Parse the v2 header at `pos`; the batch body is not checked. (``storage.batch``'s
    ``parse_batch_header`` is the broker's stricter parser; this one raises RecordDecodeError
    and lets readers of whole files meet a truncated body later.)"""
    if len(buf) - pos < HEADER_SIZE:
        raise RecordDecodeError(f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    h = unpack_batch_header(buf, pos)
    if h.magic != 2:
        raise RecordDecodeError(f"batch at byte {pos} has magic {h.magic}, expected 2")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise RecordDecodeError(f"batch length {h.batch_length} is smaller than its header")
    return h


def _records_region(
    buf: bytes | memoryview, pos: int, h: RecordBatchHeader, verify: bool, limit: int
) -> bytes:
    end = pos + h.size_in_bytes
    if end > len(buf):
        raise RecordDecodeError(
            f"batch of {h.size_in_bytes} bytes is truncated at {len(buf) - pos}"
        )
    body = memoryview(buf)[pos + 21 : end]
    if verify and (_crc32c.crc32c(body) & 0xFFFFFFFF) != h.crc:
        raise RecordDecodeError(f"batch at offset {h.base_offset}: CRC-32C mismatch (corrupt)")
    data = bytes(body[HEADER_SIZE - 21 :])
    if h.compression:
        data = decompress(h.compression, data, limit=limit)
    if h.records_count < 0 or h.records_count * _MIN_RECORD_SIZE > len(data):
        raise RecordDecodeError(
            f"batch claims {h.records_count} records in {len(data)} bytes of record data"
        )
    return data


def batch_records_bytes(
    buf: bytes | memoryview, pos: int = 0, *, verify_crc: bool = True, limit: int = MAX_UNCOMPRESSED
) -> tuple[RecordBatchHeader, bytes]:
    """The header and the (decompressed, CRC-checked) record bytes of the v2 batch at `pos`,
    for readers that decode records their own way."""
    h = read_batch_header(buf, pos)
    return h, _records_region(buf, pos, h, verify_crc, limit)


def _decode_records(data: bytes, h: RecordBatchHeader, cols: RecordColumns) -> None:
    """Append every record of one batch to `cols`. The hot loop of bulk reads: flat, with inline
    paths for one- and two-byte varints, bound appends (an IndexError means truncated data).

    The inline varint paths mirror ``storage.varint.read_uvarint`` (called for longer ones):
    a batch of small records decodes ~1.9x faster (scripts/bench/record_decode.py); the
    Hypothesis test ``tests/storage/test_varint.py`` checks that both agree."""
    off_add, ts_add = cols.offsets.append, cols.timestamps.append
    key_add, val_add, hdr_add = cols.keys.append, cols.values.append, cols.headers.append
    base_offset, base_ts, n, uv = h.base_offset, h.base_timestamp, len(data), read_uvarint
    append_ts = h.max_timestamp if h.timestamp_type == 1 else None
    no_headers: tuple[tuple[str, bytes | None], ...] = ()
    pos = 0
    for _ in range(h.records_count):
        v = data[pos]  # record length
        if v < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            v, pos = (v & 0x7F) | data[pos + 1] << 7, pos + 2
        else:
            v, pos = uv(data, pos, n)
        end = pos + ((v >> 1) ^ -(v & 1))
        if end > n or end < pos + 6:
            raise RecordDecodeError(f"record length {end - pos} overruns the batch")
        v = data[pos + 1]  # timestamp delta, after the attributes byte
        if v < 0x80:
            pos += 2
        elif data[pos + 2] < 0x80:
            v, pos = (v & 0x7F) | data[pos + 2] << 7, pos + 3
        else:
            v, pos = uv(data, pos + 1, n)
        if append_ts is None:
            ts_add(base_ts + ((v >> 1) ^ -(v & 1)))
        else:
            ts_add(append_ts)
        v = data[pos]  # offset delta
        if v < 0x80:
            pos += 1
        elif data[pos + 1] < 0x80:
            v, pos = (v & 0x7F) | data[pos + 1] << 7, pos + 2
        else:
            v, pos = uv(data, pos, n)
        off_add(base_offset + ((v >> 1) ^ -(v & 1)))
        # The key and the value are read by two inline copies of the same steps: one shared
        # function costs 1.2-1.6x per batch of small records (scripts/bench/record_decode.py).
        v = data[pos]  # key length
        if v == 1:
            key_add(None)
            pos += 1
        else:
            if v < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                v, pos = (v & 0x7F) | data[pos + 1] << 7, pos + 2
            else:
                v, pos = uv(data, pos, n)
            if v & 1:
                raise RecordDecodeError(f"invalid key length {(v >> 1) ^ -1}")
            v >>= 1
            if pos + v > end:
                raise RecordDecodeError(f"key length {v} overruns its record")
            key_add(data[pos : pos + v])
            pos += v
        v = data[pos]  # value length
        if v == 1:
            val_add(None)
            pos += 1
        else:
            if v < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                v, pos = (v & 0x7F) | data[pos + 1] << 7, pos + 2
            else:
                v, pos = uv(data, pos, n)
            if v & 1:
                raise RecordDecodeError(f"invalid value length {(v >> 1) ^ -1}")
            v >>= 1
            if pos + v > end:
                raise RecordDecodeError(f"value length {v} overruns its record")
            val_add(data[pos : pos + v])
            pos += v
        if data[pos] == 0:  # no headers: the common case
            hdr_add(no_headers)
            pos += 1
        else:
            pos = decode_headers(data, pos, end, cols.headers)
        if pos != end:
            raise RecordDecodeError(
                f"record at offset {cols.offsets[-1]} has {end - pos} bytes more or less "
                "than its length says"
            )
    if pos != n:
        raise RecordDecodeError(f"{n - pos} bytes left over after the batch's records")
    cols.timestamp_types.extend([h.timestamp_type] * h.records_count)


def decode_headers(
    data: bytes, pos: int, end: int, out: list[tuple[tuple[str, bytes | None], ...]]
) -> int:
    """Decode the header count and headers of the record ending at `end`, appending them as one
    tuple to `out`; returns the position after them."""
    count, pos = read_varint(data, pos, end)
    if count < 0 or count * 2 > end - pos:
        raise RecordDecodeError(f"header count {count} overruns its record")
    headers = []
    for _ in range(count):
        klen, pos = read_varint(data, pos, end)
        if klen < 0 or pos + klen > end:
            raise RecordDecodeError(f"header key length {klen} overruns its record")
        key = data[pos : pos + klen].decode("utf-8", "replace")
        pos += klen
        vlen, pos = read_varint(data, pos, end)
        if vlen < -1 or pos + vlen > end:
            raise RecordDecodeError(f"header value length {vlen} overruns its record")
        value = None if vlen == -1 else data[pos : pos + vlen]
        pos += max(vlen, 0)
        headers.append((key, value))
    out.append(tuple(headers))
    return pos


def decode_batch_into(
    buf: bytes | memoryview,
    cols: RecordColumns,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    limit: int = MAX_UNCOMPRESSED,
) -> RecordBatchHeader:
    """Decode the v2 batch at `pos`, appending its records to `cols`; returns its header.
    Control batches are appended like data batches; callers check `header.is_control`."""
    h = read_batch_header(buf, pos)
    data = _records_region(buf, pos, h, verify_crc, limit)
    mark = len(cols)
    try:
        _decode_records(data, h, cols)
    except IndexError:
        _truncate(cols, mark)
        raise RecordDecodeError(
            f"batch at offset {h.base_offset}: record data is truncated"
        ) from None
    except (RecordDecodeError, VarintError) as e:
        _truncate(cols, mark)
        raise RecordDecodeError(f"batch at offset {h.base_offset}: {e}") from None
    return h


def _truncate(cols: RecordColumns, n: int) -> None:
    for col in (
        cols.offsets,
        cols.timestamps,
        cols.timestamp_types,
        cols.keys,
        cols.values,
        cols.headers,
    ):
        del col[n:]


def _sequence(base: int, delta: int) -> int:
    if base < 0:
        return -1
    return (base + delta) % 0x80000000


def decode_batch(
    buf: bytes | memoryview, pos: int = 0, *, verify_crc: bool = True, limit: int = MAX_UNCOMPRESSED
) -> DecodedBatch:
    """Decode one v2 batch (header and records). Control records are flagged."""
    cols = RecordColumns()
    h = decode_batch_into(buf, cols, pos, verify_crc=verify_crc, limit=limit)
    records = []
    for off, ts, key, value, headers in zip(
        cols.offsets, cols.timestamps, cols.keys, cols.values, cols.headers, strict=True
    ):
        ctype = -1
        if h.is_control:
            if key is None or len(key) < 4:
                raise RecordDecodeError(f"control record at offset {off} has a short key")
            ctype = _CONTROL_KEY.unpack_from(key)[1]
        records.append(
            Record(
                off,
                ts,
                key,
                value,
                headers,
                h.timestamp_type,
                _sequence(h.base_sequence, off - h.base_offset),
                h.is_control,
                ctype,
            )
        )
    return DecodedBatch(h, tuple(records))


# ---------------------------------------------------------------- legacy v0/v1


def legacy_message_header(
    buf: bytes | memoryview, pos: int = 0
) -> tuple[int, int, int, int, int, int]:
    """offset, size, crc, magic, attributes and timestamp (-1 for magic 0) of the v0/v1
    message at ``pos``, unchecked: ``dump-log`` shows corrupt messages too. The caller makes
    sure the 18 bytes up to the attributes are there."""
    offset, size, crc, magic, attributes = _LEGACY_V0.unpack_from(buf, pos)
    timestamp = -1
    if magic == 1 and len(buf) - pos >= _LEGACY_V1.size:
        timestamp = _LEGACY_V1.unpack_from(buf, pos)[5]
    return offset, size, crc, magic, attributes, timestamp


def legacy_inner_crc_checks(buf: bytes, magic: int, codec: int) -> list[tuple[int, bool]]:
    """(crc, whether it holds) of each message inside the compressed v0/v1 wrapper ``buf``
    (the whole wrapper, log overhead included), without decoding them (``dump-log``)."""
    p = (_LEGACY_V1 if magic == 1 else _LEGACY_V0).size
    (klen,) = _I32.unpack_from(buf, p)
    p += 4 + max(klen, 0)
    (vlen,) = _I32.unpack_from(buf, p)
    value = buf[p + 4 : p + 4 + max(vlen, 0)]
    inner = decompress(codec, value, magic=magic)
    out: list[tuple[int, bool]] = []
    ip = 0
    while ip + LOG_OVERHEAD + 5 <= len(inner):
        (size,) = _I32.unpack_from(inner, ip + 8)
        (crc,) = _U32.unpack_from(inner, ip + 12)
        body = inner[ip + 16 : ip + LOG_OVERHEAD + size]
        out.append((crc, zlib.crc32(body) == crc))
        ip += LOG_OVERHEAD + size
    return out


def decode_legacy_entry(
    buf: bytes | memoryview, pos: int = 0, *, verify_crc: bool = True, limit: int = MAX_UNCOMPRESSED
) -> LegacyBatch:
    """Decode the v0/v1 message at `pos`, unwrapping a compressed wrapper into its records."""
    if len(buf) - pos < LOG_OVERHEAD + 14:
        raise RecordDecodeError("legacy message is truncated")
    magic = buf[pos + 16]
    hs = _LEGACY_V0 if magic == 0 else _LEGACY_V1
    if magic not in (0, 1):
        raise RecordDecodeError(f"message at byte {pos} has magic {magic}, expected 0 or 1")
    if len(buf) - pos < hs.size:
        raise RecordDecodeError("legacy message header is truncated")
    fields = hs.unpack_from(buf, pos)
    offset, size, crc, _, attrs = fields[:5]
    ts = fields[5] if magic == 1 else -1
    end = pos + LOG_OVERHEAD + size
    if size < hs.size - LOG_OVERHEAD + 8 or end > len(buf):
        raise RecordDecodeError(f"legacy message at offset {offset}: size {size} is invalid")
    body = bytes(memoryview(buf)[pos + 16 : end])
    if verify_crc and zlib.crc32(body) != crc:
        raise RecordDecodeError(f"legacy message at offset {offset}: CRC-32 mismatch (corrupt)")
    p = hs.size - 16
    kv: list[bytes | None] = []
    for what in ("key", "value"):
        (n,) = _I32.unpack_from(body, p) if p + 4 <= len(body) else (-2,)
        if n < -1 or p + 4 + max(n, 0) > len(body):
            raise RecordDecodeError(f"legacy message at offset {offset}: bad {what} length {n}")
        kv.append(None if n == -1 else body[p + 4 : p + 4 + n])
        p += 4 + max(n, 0)
    if p != len(body):
        raise RecordDecodeError(f"legacy message at offset {offset}: trailing bytes")
    ts_type = (attrs >> 3) & 1 if magic == 1 else -1
    codec = attrs & 0x07
    if codec == 0:
        rec = Record(offset, ts, kv[0], kv[1], (), ts_type, magic=magic)
        return LegacyBatch(offset, end - pos, magic, crc, attrs, ts, (rec,))
    if kv[1] is None:
        raise RecordDecodeError(f"compressed wrapper at offset {offset} has a null value")
    inner_buf = decompress(codec, kv[1], magic=magic, limit=limit)
    inner: list[Record] = []
    ip = 0
    while ip < len(inner_buf):
        e = decode_legacy_entry(inner_buf, ip, verify_crc=verify_crc, limit=limit)
        if e.attributes & 0x07:
            raise RecordDecodeError(f"wrapper at offset {offset} holds a compressed message")
        inner.extend(e.records)
        ip += e.size
    if not inner:
        raise RecordDecodeError(f"compressed wrapper at offset {offset} holds no messages")
    base = 0  # v0 inner offsets are absolute; v1 are relative to the wrapper's last offset
    if magic == 1 and offset != 0:
        base = offset - inner[-1].offset
        if base < 0:
            raise RecordDecodeError(f"wrapper offset {offset} is below its inner offsets")
    out = tuple(
        Record(
            base + r.offset,
            ts if ts_type == 1 else r.timestamp,
            r.key,
            r.value,
            (),
            ts_type if ts_type == 1 else r.timestamp_type,
            magic=r.magic,
        )
        for r in inner
    )
    return LegacyBatch(offset, end - pos, magic, crc, attrs, ts, out)


# ---------------------------------------------------------------- iteration


def iter_batches(
    buf: bytes | memoryview, *, verify_crc: bool = True, limit: int = MAX_UNCOMPRESSED
) -> Iterator[DecodedBatch | LegacyBatch]:
    """Every batch in concatenated log data (any magic), stopping cleanly at a partial
    trailing batch (as a fetch answer or a crashed log may end)."""
    pos, n = 0, len(buf)
    while n - pos >= LOG_OVERHEAD + 5:
        (length,) = _I32.unpack_from(buf, pos + 8)
        if length < 14:
            raise RecordDecodeError(f"batch at byte {pos} has invalid length {length}")
        if pos + LOG_OVERHEAD + length > n:
            return
        magic = buf[pos + 16]
        if magic == 2:
            b: DecodedBatch | LegacyBatch = decode_batch(
                buf, pos, verify_crc=verify_crc, limit=limit
            )
        else:
            b = decode_legacy_entry(buf, pos, verify_crc=verify_crc, limit=limit)
        yield b
        pos += LOG_OVERHEAD + length


def iter_records(
    buf: bytes | memoryview, *, include_control: bool = False, verify_crc: bool = True
) -> Iterator[Record]:
    """Every record in concatenated batches (any magic), in log order."""
    for batch in iter_batches(buf, verify_crc=verify_crc):
        if include_control or not (isinstance(batch, DecodedBatch) and batch.is_control):
            yield from batch.records


# ---------------------------------------------------------------- encoding


def _bytes_field(b: bytes | None, out: bytearray) -> None:
    if b is None:
        out.append(1)  # zigzag(-1)
    else:
        write_varint(len(b), out)
        out += b


def encode_batch(
    records: Iterable[Record | NewRecord],
    *,
    base_offset: int = 0,
    compression: str | int = "none",
    compression_level: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_type: int = 0,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
    empty_timestamp: int = -1,
) -> bytes:
    """Build a v2 batch. A `NewRecord` gets offset base_offset + its index; a `Record` keeps
    its own offset (gaps allowed, as compaction leaves them). `last_offset_delta` keeps a
    batch's last offset when its last records were removed; an empty batch is allowed."""
    code = COMPRESSION_CODES.get(compression) if isinstance(compression, str) else compression
    if code not in COMPRESSION_NAMES:
        raise ValueError(f"unknown compression {compression!r}: use {sorted(COMPRESSION_CODES)}")
    recs = list(records)
    now = int(time.time() * 1000)
    stamps = [now if r.timestamp is None else r.timestamp for r in recs]
    base_ts = stamps[0] if recs else empty_timestamp
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    body, prev = bytearray(), -1
    for i, r in enumerate(recs):
        delta = r.offset - base_offset if isinstance(r, Record) else i
        if delta <= prev:
            raise ValueError(f"record offsets must increase from base_offset {base_offset}")
        prev = delta
        rec = bytearray(b"\x00")  # attributes
        write_varint(stamps[i] - base_ts, rec)
        write_varint(delta, rec)
        _bytes_field(r.key, rec)
        _bytes_field(r.value, rec)
        write_varint(len(r.headers), rec)
        for hk, hv in r.headers:
            _bytes_field(hk.encode("utf-8"), rec)
            _bytes_field(hv, rec)
        write_varint(len(rec), body)
        body += rec
    payload = compress(code, bytes(body), level=compression_level) if code else bytes(body)
    lod = prev if last_offset_delta is None else last_offset_delta
    if lod < max(prev, 0 if recs else -1):
        raise ValueError(f"last_offset_delta {lod} is below the last record's delta {prev}")
    max_ts = max_timestamp if max_timestamp is not None else (max(stamps) if recs else base_ts)
    attrs = code | (timestamp_type & 1) << 3 | is_transactional << 4 | is_control << 5
    attrs |= (delete_horizon_ms is not None) << 6
    head = bytearray(
        HEADER_STRUCT.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            2,
            0,
            attrs,
            max(lod, 0),
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(recs),
        )
    )
    crc = _crc32c.crc32c(bytes(head[21:]) + payload) & 0xFFFFFFFF
    struct.pack_into(">I", head, 17, crc)
    return bytes(head) + payload


def encode_control_batch(
    control_type: int,
    *,
    base_offset: int = 0,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """An end-transaction marker: control_type 0 = ABORT, 1 = COMMIT."""
    rec = NewRecord(
        _CONTROL_KEY.pack(0, control_type), _CONTROL_VALUE.pack(0, coordinator_epoch), (), timestamp
    )
    return encode_batch(
        [rec],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def control_marker(record: Record) -> tuple[int, int]:
    """(control type, coordinator epoch) of a control record."""
    if (
        not record.is_control
        or record.key is None
        or record.value is None
        or len(record.key) < 4
        or len(record.value) < 6
    ):
        raise RecordDecodeError(f"record at offset {record.offset} is not a control record")
    return _CONTROL_KEY.unpack_from(record.key)[1], _CONTROL_VALUE.unpack_from(record.value)[1]


def records_of(batches: Sequence[DecodedBatch | LegacyBatch]) -> list[Record]:
    """Flatten decoded batches into their records."""
    return [r for b in batches for r in b.records]
