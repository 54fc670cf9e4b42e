"""Read records straight from a Kafka-layout log dir (a live tidelog's, or a copy of one).

Layout (Kafka's): `<dir>/<topic>-<partition>/<20-digit base offset>.log` segments with `.index`
files beside them; `<dir>/replication-offset-checkpoint` holds each partition's high watermark
and `log-start-offset-checkpoint` its log start, both as "0", a count line, then
"topic partition offset" lines. Only records below the high watermark are read (a partition
missing from the checkpoint is read to its last complete batch). Gaps in offsets (compaction)
and legacy v0/v1 message sets are fine; control batches are skipped, as consumers skip them.
No broker is involved: the files are only read.

``kafka.isolation.level=read_committed`` (Kafka's consumer setting, as Spark's Kafka source
passes it on): reading stops at the last stable offset - the first offset of the earliest
transaction still open below the high watermark, found from the partition's latest producer
snapshot (``storage.producer_snapshot``) and the batch headers after it - and batches of aborted
transactions are skipped: those the partition's ``.txnindex`` files (``storage.transaction_index``)
list as overlapping the range read, found by the partition log's own look-up
(``storage.transaction_state.collect_aborted_transactions``: the index of the segment holding the
range's start and of the later ones, as a transaction is indexed in the segment of its marker).
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tidelog.analytics.plan import TP, OffsetRange
from tidelog.storage import checkpoint
from tidelog.storage.cleaner.aborted import AbortedTransactions
from tidelog.storage.producer_snapshot import SNAPSHOT_SUFFIX, CorruptSnapshotError, read_snapshot
from tidelog.storage.record_codec import (
    LOG_OVERHEAD,
    RecordBatchHeader,
    RecordColumns,
    RecordDecodeError,
    batch_records_bytes,
    decode_batch_into,
    decode_legacy_entry,
    read_batch_header,
)
from tidelog.storage.transaction_index import TXNINDEX_SUFFIX, TransactionIndex
from tidelog.storage.transaction_state import collect_aborted_transactions

_PARTITION_DIR = re.compile(r"(.+)-(\d+)")
_SEGMENT = re.compile(r"(\d{20})\.log")
_CHUNK = 8 * 1024 * 1024
_YIELD_ROWS = 65536
_LEN = struct.Struct(">i")


class LogDirError(ValueError):
    """The path is not a readable Kafka log dir."""


def read_checkpoint(path: Path) -> dict[TP, int]:
    """Kafka's offset checkpoint text file (``storage.checkpoint``); {} when it does not exist."""
    try:
        return checkpoint.read_checkpoint(path)
    except checkpoint.CheckpointError as e:
        raise LogDirError(f"not a Kafka offset checkpoint ({e})") from None


class LogDir:
    """A `Backend` over segment files."""

    def __init__(self, path: str | os.PathLike[str], *, read_committed: bool = False) -> None:
        self.read_committed = read_committed
        self.root = Path(path)
        if not self.root.is_dir():
            raise LogDirError(
                f"option path={str(path)!r}: not a directory; point it at a "
                "broker's log.dirs entry (or a copy of one)"
            )
        self._hw = read_checkpoint(self.root / "replication-offset-checkpoint")
        self._log_start = read_checkpoint(self.root / "log-start-offset-checkpoint")

    def close(self) -> None:
        pass

    # ------------------------------------------------------------ layout

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for entry in os.scandir(self.root):
            m = _PARTITION_DIR.fullmatch(entry.name)
            if m and entry.is_dir():
                out.setdefault(m.group(1), []).append(int(m.group(2)))
        return {t: sorted(ps) for t, ps in sorted(out.items())}

    def segments(self, tp: TP) -> list[tuple[int, Path]]:
        d = self.root / f"{tp[0]}-{tp[1]}"
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            return []
        segs = [(int(m.group(1)), d / n) for n in names if (m := _SEGMENT.fullmatch(n))]
        return sorted(segs)

    def log_end(self, tp: TP) -> int:
        """Next offset after the last complete batch (the log end offset)."""
        segs = self.segments(tp)
        for base, path in reversed(segs):
            last = None
            for h, _, _ in _scan(path, _index_position(path, base, base + (1 << 61))):
                last = h
            if last is not None:
                return last.next_offset
            if base or len(segs) == 1:
                return base
        return 0

    def earliest(self, tps: list[TP]) -> dict[TP, int]:
        out = {}
        for tp in tps:
            segs = self.segments(tp)
            out[tp] = max(segs[0][0] if segs else 0, self._log_start.get(tp, 0))
        return out

    def latest(self, tps: list[TP]) -> dict[TP, int]:
        out = {}
        for tp in tps:
            leo = self.log_end(tp)
            out[tp] = min(self._hw[tp], leo) if tp in self._hw else leo
            if self.read_committed:
                first_open = self._first_open_transaction(tp, out[tp])
                if first_open is not None:
                    out[tp] = min(out[tp], first_open)
        return out

    def _first_open_transaction(self, tp: TP, end: int) -> int | None:
        """First offset of the earliest transaction open at ``end`` (read-only replay of the
        headers after the latest usable producer snapshot)."""
        d = self.root / f"{tp[0]}-{tp[1]}"
        start, open_txns = 0, {}
        snapshots = sorted(
            (int(n[:20]), d / n)
            for n in (os.listdir(d) if d.is_dir() else [])
            if n.endswith(SNAPSHOT_SUFFIX) and n[:20].isdigit() and len(n) == 20 + 9
        )
        for offset, path in reversed(snapshots):
            if offset > end:
                continue
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, OSError):
                continue
            start = offset
            open_txns = {
                e.producer_id: e.current_txn_first_offset
                for e in entries
                if e.current_txn_first_offset >= 0
            }
            break
        for h, _, _ in self._walk(tp, start, end, include_control=True):
            if h.producer_id < 0 or h.base_offset < start:
                continue
            if h.is_control or not h.is_transactional:
                open_txns.pop(h.producer_id, None)
            else:
                open_txns.setdefault(h.producer_id, h.base_offset)
        return min(open_txns.values()) if open_txns else None

    @staticmethod
    def _aborted_in(segs: list[tuple[int, Path]], start: int, end: int) -> AbortedTransactions:
        """The aborted transactions overlapping [start, end); ``segs`` from the one holding
        ``start`` on."""
        indexes = []
        for base, path in segs:
            txn_path = path.with_name(f"{base:020d}{TXNINDEX_SUFFIX}")
            if txn_path.exists():
                indexes.append(TransactionIndex(txn_path))
        return AbortedTransactions(collect_aborted_transactions(indexes, start, end))

    def offsets_for_time(self, tps: list[TP], ts: int) -> dict[TP, int | None]:
        """First offset whose timestamp is >= ts (below the high watermark), else None."""
        hw = self.latest(tps)
        out: dict[TP, int | None] = {}
        for tp in tps:
            out[tp] = None
            cols = RecordColumns()
            for cols in self._columns(tp, 0, hw[tp], min_timestamp=ts):
                hit = next(
                    (o for o, t in zip(cols.offsets, cols.timestamps, strict=True) if t >= ts), None
                )
                if hit is not None:
                    out[tp] = hit
                    break
        return out

    # ------------------------------------------------------------ reading

    def read(self, r: OffsetRange) -> Iterator[RecordColumns]:
        yield from self._columns((r.topic, r.partition), r.start, r.end)

    def read_arrow(self, r: OffsetRange, headers: bool) -> Iterator[Any]:
        """The range as Arrow record batches, through the vectorised decoder."""
        from tidelog.analytics.arrow import ArrowDecoder, to_arrow

        dec = ArrowDecoder(r.topic, r.partition, r.start, r.end, headers)
        for h, data, p in self._walk((r.topic, r.partition), r.start, r.end):
            if h.magic == 2:
                dec.add(*batch_records_bytes(data, p))
                if dec.full and (out := dec.flush()) is not None:
                    yield out
                continue
            if (out := dec.flush()) is not None:  # keep log order around a legacy message
                yield out
            cols = RecordColumns()
            _decode_filtered(data, p, h, cols, r.start, r.end)
            yield to_arrow(cols, r.topic, r.partition, headers)
        if (out := dec.flush()) is not None:
            yield out

    def _walk(self, tp: TP, start: int, end: int, *, min_timestamp: int | None = None,
              include_control: bool = False,
              ) -> Iterator[tuple[RecordBatchHeader, memoryview, int]]:  # fmt: skip
        """The data batches that may hold offsets in [start, end), in log order (read_committed:
        not those of aborted transactions)."""
        if start >= end:
            return
        segs = self.segments(tp)
        first = max((i for i, (base, _) in enumerate(segs) if base <= start), default=0)
        segs = segs[first:]
        aborted = (
            self._aborted_in(segs, start, end)
            if self.read_committed and not include_control
            else None
        )
        for base, path in segs:
            if base >= end:
                return
            pos = _index_position(path, base, start) if base < start else 0
            for h, data, p in _scan(path, pos):
                if h.next_offset <= start:
                    continue
                if h.base_offset >= end:
                    return
                if include_control:
                    yield h, data, p
                    continue
                if h.is_control or h.records_count == 0:
                    continue
                if aborted and aborted.is_aborted(h):  # type: ignore[arg-type]
                    continue
                if min_timestamp is not None and h.max_timestamp < min_timestamp:
                    continue
                yield h, data, p

    def _columns(self, tp: TP, start: int, end: int, *,
                 min_timestamp: int | None = None) -> Iterator[RecordColumns]:  # fmt: skip
        """Records with start <= offset < end, in column chunks; with `min_timestamp`, only
        batches that may hold a timestamp >= it are decoded."""
        cols = RecordColumns()
        for h, data, p in self._walk(tp, start, end, min_timestamp=min_timestamp):
            if h.magic == 2 and h.base_offset >= start and h.last_offset < end:
                decode_batch_into(data, cols, p)
            else:
                _decode_filtered(data, p, h, cols, start, end)
            if len(cols) >= _YIELD_ROWS:
                yield cols
                cols = RecordColumns()
        if len(cols):
            yield cols


def _decode_filtered(
    data: memoryview, pos: int, h: RecordBatchHeader, cols: RecordColumns, start: int, end: int
) -> None:
    tmp = RecordColumns()
    if h.magic == 2:
        decode_batch_into(data, tmp, pos)
    else:
        for rec in decode_legacy_entry(data, pos).records:
            tmp.offsets.append(rec.offset)
            tmp.timestamps.append(rec.timestamp)
            tmp.timestamp_types.append(max(rec.timestamp_type, 0))
            tmp.keys.append(rec.key)
            tmp.values.append(rec.value)
            tmp.headers.append(())
    for i, off in enumerate(tmp.offsets):
        if start <= off < end:
            cols.offsets.append(off)
            cols.timestamps.append(tmp.timestamps[i])
            cols.timestamp_types.append(tmp.timestamp_types[i])
            cols.keys.append(tmp.keys[i])
            cols.values.append(tmp.values[i])
            cols.headers.append(tmp.headers[i])


def _legacy_header(data: memoryview, pos: int) -> RecordBatchHeader:
    """A stand-in header for a v0/v1 outer message: enough to place it by offset."""
    e = decode_legacy_entry(data, pos)
    size = e.size - LOG_OVERHEAD
    n = len(e.records)
    ts = max((r.timestamp for r in e.records), default=-1)
    return RecordBatchHeader(
        e.base_offset,
        size,
        -1,
        e.magic,
        e.crc,
        e.attributes,
        e.last_offset - e.base_offset,
        ts,
        ts,
        -1,
        -1,
        -1,
        n,
    )


def _scan(path: Path, pos: int) -> Iterator[tuple[RecordBatchHeader, memoryview, int]]:
    """Every complete batch of a segment from byte `pos`: (header, buffer, position in buffer).
    Stops quietly at a partial trailing batch (an append in flight)."""
    with open(path, "rb") as f:
        f.seek(pos)
        carry = b""
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                return
            data = memoryview(carry + chunk if carry else chunk)
            p, n = 0, len(data)
            while n - p >= LOG_OVERHEAD + 5:
                (length,) = _LEN.unpack_from(data, p + 8)
                if length < 14:
                    if not any(data[p:]) and not f.read(1 << 16).strip(b"\0"):
                        return  # a zero-filled (preallocated) tail: the end of the log
                    raise RecordDecodeError(
                        f"{path}: batch at byte {pos + p} has length "
                        f"{length}; the segment is corrupt"
                    )
                if p + LOG_OVERHEAD + length > n:
                    break
                h = read_batch_header(data, p) if data[p + 16] == 2 else _legacy_header(data, p)
                yield h, data, p
                p += LOG_OVERHEAD + length
            pos += p
            carry = bytes(data[p:])


def _index_position(segment: Path, base: int, target: int) -> int:
    """Byte position in `segment` of the last indexed batch at or before `target` (0 when the
    .index has no usable entry). Entries are (relative offset i32, position i32); a
    preallocated tail is zeros. A position that does not hold such a batch is not used."""
    pos = _indexed(segment.with_suffix(".index"), base, target)
    if pos:
        try:
            with open(segment, "rb") as f:
                head = os.pread(f.fileno(), LOG_OVERHEAD + 5, pos)
            off, length = struct.unpack_from(">qi", head)
            if (
                len(head) < LOG_OVERHEAD + 5
                or not base <= off <= target
                or length < 14
                or head[16] > 2
            ):
                return 0
        except (OSError, struct.error):
            return 0
    return pos


def _indexed(index: Path, base: int, target: int) -> int:
    try:
        with open(index, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                return 0
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                n = size // 8

                def key(i: int) -> int:
                    rel = int.from_bytes(m[i * 8 : i * 8 + 4], "big")
                    return rel if i == 0 or rel > 0 else 1 << 62

                lo, hi = 0, n - 1  # last i with key(i) <= target - base
                if key(0) > target - base:
                    return 0
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if key(mid) <= target - base:
                        lo = mid
                    else:
                        hi = mid - 1
                return int.from_bytes(m[lo * 8 + 4 : lo * 8 + 8], "big")
    except (OSError, ValueError):
        return 0
