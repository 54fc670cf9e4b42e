"""Records as Arrow batches in the Kafka source's column order, and the fast bulk decoder.

`ArrowDecoder` gathers the (decompressed) record bytes of many v2 batches into one buffer and
decodes all their records at once with numpy: record starts are found with one short Python
step per record (none when every record of a batch has the same size), every field after that
is read by vectorised varint decoding, and the key / value columns are built straight from
offsets into the buffer, with no Python object per record. Every length is checked as strictly
as `storage.record_codec` checks it; on any doubt the chunk is decoded again by the codec, which
then names the problem.
"""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from tidelog.storage.record_codec import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    RecordBatchHeader,
    RecordColumns,
    RecordDecodeError,
    decode_batch_into,
    decode_headers,  # the codec's strict parser
)
from tidelog.storage.varint import read_uvarint

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TS_TYPE = pa.timestamp("us", tz="UTC")
NAMES = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
CHUNK_BYTES = 8 * 1024 * 1024
_RUN = 512  # records compared at once when walking runs of one size
_AR = np.arange(_RUN, dtype=np.int64)
_WALK = 64  # records stepped one by one after a run check finds sizes varying
I64 = npt.NDArray[np.int64]


def headers_array(rows: list[tuple[tuple[str, bytes | None], ...]]) -> pa.Array:
    """list<struct<key, value>> from flat arrays (far faster than from Python lists); null for a
    record without headers."""
    offsets = [0] * (len(rows) + 1)
    keys: list[str] = []
    values: list[bytes | None] = []
    total = 0
    for i, h in enumerate(rows):
        if h:
            total += len(h)
            for k, v in h:
                keys.append(k)
                values.append(v)
        offsets[i + 1] = total
    items = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(values, pa.binary())], names=["key", "value"]
    )
    # A record without headers gets a null list, as Spark's Kafka connector gives it (its
    # KafkaRecordToRowConverter writes null when the record's header iterator is empty).
    empty = pa.array([not h for h in rows], pa.bool_())
    return pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()), items, type=HEADER_TYPE, mask=empty
    )


def _batch(
    key: pa.Array,
    value: pa.Array,
    topic: str,
    partition: int,
    offsets: pa.Array,
    ts_ms: pa.Array,
    ts_types: pa.Array,
    headers: pa.Array | None,
) -> pa.RecordBatch:
    n = len(offsets)
    arrays = [
        key,
        value,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        offsets,
        pc.multiply(ts_ms, 1000).cast(TS_TYPE),
        ts_types,
    ]
    if headers is None:
        return pa.RecordBatch.from_arrays(arrays, names=NAMES)
    return pa.RecordBatch.from_arrays([*arrays, headers], names=[*NAMES, "headers"])


def to_arrow(cols: RecordColumns, topic: str, partition: int, headers: bool) -> pa.RecordBatch:
    """One Arrow batch from decoded columns (the general path)."""
    return _batch(
        pa.array(cols.keys, pa.binary()),
        pa.array(cols.values, pa.binary()),
        topic,
        partition,
        pa.array(cols.offsets, pa.int64()),
        pa.array(cols.timestamps, pa.int64()),
        pa.array(cols.timestamp_types, pa.int32()),
        headers_array(cols.headers) if headers else None,
    )


def _varints(a: npt.NDArray[np.uint8], p: I64) -> tuple[I64, I64]:
    """Zigzag varints starting at each position in `p`: (values, positions after them)."""
    b = a[p].astype(np.uint64)
    acc = b & 0x7F
    more = b >= 0x80
    size = np.ones_like(p)
    k = 1
    while more.any():
        if k == 10:
            raise RecordDecodeError("varint longer than 10 bytes")
        b = a[p + k].astype(np.uint64)
        acc |= np.where(more, (b & 0x7F) << np.uint64(7 * k), np.uint64(0))
        size += more
        more &= b >= 0x80
        k += 1
    val = (acc >> np.uint64(1)).view(np.int64) ^ -(acc & np.uint64(1)).view(np.int64)
    return val, p + size


def _gather(a: npt.NDArray[np.uint8], starts: I64, sizes: I64, offsets: I64, total: int
            ) -> npt.NDArray[np.uint8]:  # fmt: skip
    """The bytes a[start:start+size] of every value, back to back. Values come in runs of one
    size at one stride, each copied as a 2-D strided view; when runs are short, a mask picks the
    bytes (+1 where a value starts, -1 where it ends, summed: values never overlap or touch)."""
    n = len(starts)
    stride = np.empty(n, np.int64)
    stride[:-1] = starts[1:] - starts[:-1]
    stride[-1] = stride[-2] if n > 1 else 0
    cut = np.flatnonzero((sizes[1:] != sizes[:-1]) | (stride[1:] != stride[:-1])) + 1
    if len(cut) * 8 > n:
        some = sizes > 0
        marks = np.zeros(len(a) + 1, np.int8)
        marks[starts[some]] = 1
        marks[starts[some] + sizes[some]] = -1
        return a[np.cumsum(marks[:-1], dtype=np.int8).view(np.bool_)]
    out = np.empty(total, np.uint8)
    bounds = [0, *cut.tolist(), n]
    for i, j in itertools.pairwise(bounds):
        size = int(sizes[i])
        if size == 0:
            continue
        o, s0, step = int(offsets[i]), int(starts[i]), int(stride[i])
        rows = j - i if j - i == 1 else j - i - 1  # the run's last value may start a new one
        view = np.lib.stride_tricks.as_strided(a[s0:], shape=(rows, size), strides=(step, 1))
        out[o : o + rows * size] = view.reshape(-1)
        if rows < j - i:
            s1 = int(starts[j - 1])
            out[o + rows * size : o + rows * size + size] = a[s1 : s1 + size]
    return out


def _binary(a: npt.NDArray[np.uint8], starts: I64, lens: I64) -> pa.Array:
    """A binary column of a[start:start+len] (len -1 = null), built from buffers."""
    n = len(lens)
    valid = lens >= 0
    sizes = np.where(valid, lens, 0)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 2**31:
        raise RecordDecodeError("a chunk of record data is over 2 GiB")
    data = _gather(a, starts, sizes, offsets, total) if total else np.zeros(0, np.uint8)
    nulls = n - int(valid.sum())
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    buffers = [bitmap, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.binary(), n, buffers, null_count=nulls)


class ArrowDecoder:
    """Collects v2 batches of one partition and turns them into Arrow batches of the records
    with start <= offset < end."""

    def __init__(self, topic: str, partition: int, start: int, end: int, headers: bool) -> None:
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self.headers = headers
        self._regions: list[bytes] = []
        self._batches: list[RecordBatchHeader] = []
        self._size = 0

    @property
    def full(self) -> bool:
        return self._size >= CHUNK_BYTES

    def add(self, h: RecordBatchHeader, records: bytes) -> None:
        self._regions.append(records)
        self._batches.append(h)
        self._size += len(records)

    def flush(self) -> pa.RecordBatch | None:
        if not self._batches:
            return None
        regions, batches = self._regions, self._batches
        self._regions, self._batches, self._size = [], [], 0
        try:
            out = self._vectorised(regions, batches)
        except (RecordDecodeError, IndexError, ValueError):
            out = None
        if out is None:  # decode again, strictly and slowly; it raises the precise error
            cols = RecordColumns()
            for h, data in zip(batches, regions, strict=True):
                decode_batch_into(_rebuild(h, data), cols, verify_crc=False)
            out = to_arrow(cols, self.topic, self.partition, self.headers)
        return self._cut(out)

    def _cut(self, b: pa.RecordBatch) -> pa.RecordBatch:
        offs = b.column(4)
        if len(offs) and (pc.min(offs).as_py() < self.start or pc.max(offs).as_py() >= self.end):
            keep = pc.and_(pc.greater_equal(offs, self.start), pc.less(offs, self.end))
            b = b.filter(keep)
        return b

    def _starts(
        self,
        data: bytes,
        a: npt.NDArray[np.uint8],
        batches: list[RecordBatchHeader],
        bounds: list[int],
    ) -> tuple[I64, I64] | None:
        """Where each record's body begins (after its length varint) and ends. Records come in
        runs of one size (sizes change only when a delta's varint grows a byte), so a run is
        taken whole once one vectorised compare shows the same length prefix at every step."""
        parts: list[I64] = []
        body_len: list[I64] = []
        for i, h in enumerate(batches):
            pos, stop, left = bounds[i], bounds[i + 1], h.records_count
            if left <= 0 or left * 7 > stop - pos:
                return None
            while left:
                raw, body = read_uvarint(data, pos, stop)
                length = (raw >> 1) ^ -(raw & 1)
                hl = body - pos
                step = hl + length
                if length < 6 or pos + step > stop:
                    return None
                k = min(left, (stop - pos) // step, _RUN)
                if k >= 8:
                    idx = pos + step * _AR[:k]
                    same = a[idx] == data[pos]
                    for j in range(1, hl):
                        same &= a[idx + j] == data[pos + j]
                    run = k if same.all() else int(same.argmin())
                    if run >= 8:
                        parts.append(body + step * _AR[:run])
                        body_len.append(np.full(run, length, np.int64))
                        pos += step * run
                        left -= run
                        continue
                walk = min(left, _WALK)  # sizes vary here: step record by record for a while
                starts: list[int] = []
                lens: list[int] = []
                for _ in range(walk):
                    v = data[pos]
                    if v < 0x80:
                        pos += 1
                    elif data[pos + 1] < 0x80:
                        v, pos = (v & 0x7F) | data[pos + 1] << 7, pos + 2
                    else:
                        v, pos = read_uvarint(data, pos, stop)
                    v = (v >> 1) ^ -(v & 1)
                    starts.append(pos)
                    lens.append(v)
                    pos += v
                parts.append(np.array(starts, np.int64))
                body_len.append(np.array(lens, np.int64))
                left -= walk
            if pos != stop:
                return None
        first = np.concatenate(parts)
        return first, first + np.concatenate(body_len)

    def _vectorised(
        self, regions: list[bytes], batches: list[RecordBatchHeader]
    ) -> pa.RecordBatch | None:
        data = b"".join(regions) + bytes(16)  # padding: varint reads may look past the end
        bounds = [0]
        for r in regions:
            bounds.append(bounds[-1] + len(r))
        a = np.frombuffer(data, np.uint8)
        found = self._starts(data, a, batches, bounds)
        if found is None:
            return None
        starts, ends = found
        if (ends - starts < 6).any():
            return None
        counts = np.array([h.records_count for h in batches], np.int64)
        rec_batch = np.repeat(np.arange(len(batches)), counts)
        ts_d, p = _varints(a, starts + 1)  # after the attributes byte
        off_d, p = _varints(a, p)
        klen, p = _varints(a, p)
        kstart = p
        p = p + np.maximum(klen, 0)
        vlen, p = _varints(a, p)
        vstart = p
        hpos = p + np.maximum(vlen, 0)
        hcount, p = _varints(a, hpos)
        if (klen < -1).any() or (vlen < -1).any() or (hcount < 0).any() or (p > ends).any():
            return None
        plain = hcount == 0
        if (p[plain] != ends[plain]).any():
            return None
        hdr_rows: list[tuple[tuple[str, bytes | None], ...]] = []
        if self.headers or not plain.all():
            hdr_rows = [()] * len(starts)
            for i in np.flatnonzero(~plain).tolist():
                got: list[tuple[tuple[str, bytes | None], ...]] = []
                if decode_headers(data, int(hpos[i]), int(ends[i]), got) != ends[i]:
                    return None
                hdr_rows[i] = got[0]
        base_off = np.array([h.base_offset for h in batches], np.int64)[rec_batch]
        base_ts = np.array([h.base_timestamp for h in batches], np.int64)[rec_batch]
        append = np.array([h.timestamp_type == 1 for h in batches])[rec_batch]
        max_ts = np.array([h.max_timestamp for h in batches], np.int64)[rec_batch]
        ts = np.where(append, max_ts, base_ts + ts_d)
        types = np.array([h.timestamp_type for h in batches], np.int32)[rec_batch]
        return _batch(
            _binary(a, kstart, klen),
            _binary(a, vstart, vlen),
            self.topic,
            self.partition,
            pa.array(base_off + off_d),
            pa.array(ts),
            pa.array(types),
            headers_array(hdr_rows) if self.headers else None,
        )


def _rebuild(h: RecordBatchHeader, records: bytes) -> bytes:
    """An uncompressed stand-in batch for the codec's strict decoder (fallback path)."""
    head = h._replace(
        batch_length=HEADER_SIZE - LOG_OVERHEAD + len(records),
        magic=2,
        crc=0,
        attributes=h.attributes & ~0x07,
    )
    return head.pack() + records
