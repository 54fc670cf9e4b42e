"""Write a log dir in Kafka's layout with storage.record_codec (test data for the file path)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from tidelog.storage.record_codec import NewRecord, Record, encode_batch, encode_control_batch


@dataclass
class PartitionWriter:
    root: Path
    topic: str
    partition: int
    segment_bytes: int = 1 << 30
    next_offset: int = 0
    expected: list[Record] = field(default_factory=list)
    _seg_base: int = -1
    _seg_size: int = 0

    @property
    def dir(self) -> Path:
        d = self.root / f"{self.topic}-{self.partition}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _roll_if_needed(self, size: int) -> Path:
        if self._seg_base < 0 or self._seg_size + size > self.segment_bytes:
            self._seg_base, self._seg_size = self.next_offset, 0
            (self.dir / f"{self._seg_base:020d}.log").touch()
            (self.dir / f"{self._seg_base:020d}.index").touch()
        return self.dir / f"{self._seg_base:020d}.log"

    def _write(self, buf: bytes, first: int, indexed: bool = True) -> None:
        log = self._roll_if_needed(len(buf))
        position = self._seg_size
        with open(log, "ab") as f:
            f.write(buf)
        self._seg_size += len(buf)
        if indexed and position and first >= self._seg_base:
            with open(log.with_suffix(".index"), "ab") as f:
                f.write(struct.pack(">ii", first - self._seg_base, position))

    def batch(self, recs: list[NewRecord], compression: str = "none", gap: int = 0,
              **kw: object) -> None:  # fmt: skip
        """Append one batch; `gap` drops that many offsets before each record (compaction)."""
        base = self.next_offset
        if gap:
            kept = [
                Record(base + i * (gap + 1) + gap, r.timestamp or 0, r.key, r.value, r.headers)
                for i, r in enumerate(recs)
            ]
            buf = encode_batch(kept, base_offset=base, compression=compression, **kw)  # type: ignore[arg-type]
        else:
            buf = encode_batch(recs, base_offset=base, compression=compression, **kw)  # type: ignore[arg-type]
            kept = [
                Record(base + i, r.timestamp or 0, r.key, r.value, r.headers)
                for i, r in enumerate(recs)
            ]
        self._write(buf, base)
        self.next_offset = kept[-1].offset + 1
        self.expected += kept

    def control(self, commit: bool = True) -> None:
        buf = encode_control_batch(int(commit), base_offset=self.next_offset, producer_id=1,
                                   producer_epoch=0, timestamp=0)  # fmt: skip
        self._write(buf, self.next_offset)
        self.next_offset += 1

    def raw(self, buf: bytes, records: list[Record], next_offset: int) -> None:
        """Append bytes made elsewhere (legacy message sets) and what they hold."""
        self._write(buf, self.next_offset, indexed=False)
        self.expected += records
        self.next_offset = next_offset


def write_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(offsets))] + [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    path.write_text("\n".join(lines) + "\n")
