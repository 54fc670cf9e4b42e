"""Storage benchmark: append, read and recovery-scan rates next to raw os.write (+ fsync).

Not a timed test. Run from the repo root:

    .venv/bin/python scripts/bench/storage.py [--dir DIR] [--mib 256] [--fsync-count 200]

Everything is written under a temporary directory inside ``--dir`` (default: the current
directory, i.e. the same disk as the repo) and removed afterwards. Each measurement is the best
of ``--runs``; raw and tidelog runs alternate, each after an ``os.sync()``. Rates are MB/s
(10^6 bytes) of batch bytes; "fsync" rows fsync after every write (raw) / flush after every
append (tidelog).
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from crc32c import crc32c

from tidelog.storage import LogConfig, PartitionLog

MB = 1_000_000


def make_batch(size: int, records: int) -> bytes:
    """A valid v2 batch of exactly ``size`` bytes holding ``records`` records."""
    each = (size - 61) // records - 12
    last = each
    body = b""
    for _ in range(8):
        parts = bytearray()
        for i in range(records):
            n = last if i == records - 1 else each
            rec = bytearray(b"\x00") + _varint(0) + _varint(i) + _varint(-1)
            rec += _varint(n) + bytes(n) + _varint(0)
            parts += _varint(len(rec)) + rec
        body = bytes(parts)
        if 61 + len(body) == size:
            break
        last += size - 61 - len(body)
    return _frame(body, records)


def _frame(body: bytes, records: int) -> bytes:
    after_crc = struct.pack(">hiqqqhii", 0, records - 1, 1_000, 1_000, -1, -1, -1, records) + body
    length = 9 + len(after_crc)
    return struct.pack(">qiibI", 0, length, -1, 2, crc32c(after_crc)) + after_crc


def _varint(value: int) -> bytes:
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


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    os.sync()  # start every run with no dirty pages, so writeback throttling hits all alike
    start = time.perf_counter()
    nbytes = fn()
    return time.perf_counter() - start, nbytes


def raw_write(path: Path, batch: bytes, count: int, fsync: bool) -> tuple[float, int]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def run() -> int:
        for _ in range(count):
            os.write(fd, batch)
            if fsync:
                os.fsync(fd)
        return len(batch) * count

    try:
        return timed(run)
    finally:
        os.close(fd)


def tidelog_append(directory: Path, batch: bytes, count: int, fsync: bool) -> tuple[float, int]:
    config = LogConfig(flush_messages=1 if fsync else None)
    log = PartitionLog(directory, config)

    def run() -> int:
        for _ in range(count):
            log.append(batch)
            if fsync:
                log.flush()
        return len(batch) * count

    try:
        return timed(run)
    finally:
        log.close()


def tidelog_read(directory: Path, max_bytes: int) -> tuple[float, int]:
    log = PartitionLog(directory, LogConfig(), clean_shutdown=True)

    def run() -> int:
        offset = log.log_start_offset
        total = 0
        while offset < log.high_watermark:
            info = log.read(offset, max_bytes)
            total += len(info.read_bytes())
            assert info.last_offset is not None
            offset = info.last_offset + 1
        return total

    try:
        return timed(run)
    finally:
        log.close()


def tidelog_read_regions(directory: Path, max_bytes: int) -> tuple[float, int]:
    """Fetch planning only (what a sendfile path costs in Python): regions, no byte copy."""
    log = PartitionLog(directory, LogConfig(), clean_shutdown=True)

    def run() -> int:
        offset = log.log_start_offset
        total = 0
        while offset < log.high_watermark:
            info = log.read(offset, max_bytes)
            total += info.size_in_bytes
            assert info.last_offset is not None
            offset = info.last_offset + 1
        return total

    try:
        return timed(run)
    finally:
        log.close()


def recovery_scan(directory: Path) -> tuple[float, int]:
    size = sum(p.stat().st_size for p in directory.glob("*.log"))
    for index in list(directory.glob("*.index")) + list(directory.glob("*.timeindex")):
        index.unlink()

    def run() -> int:
        log = PartitionLog(directory, LogConfig(), recovery_point=0)  # unclean: scan all
        log.close()
        return size

    return timed(run)


def best(runs: int, fn: Callable[[], tuple[float, int]]) -> tuple[float, int]:
    """The fastest of ``runs`` runs (the machine may be shared: the minimum is the signal)."""
    results = [fn() for _ in range(runs)]
    return min(results, key=lambda r: r[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default=os.getcwd(), help="where to put the temporary files")
    parser.add_argument("--mib", type=int, default=256, help="MiB per no-fsync run")
    parser.add_argument("--fsync-count", type=int, default=200, help="writes per fsync run")
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (best kept)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tidelog-bench-", dir=args.dir))
    rows: list[tuple[str, str, float, int]] = []
    runs = args.runs
    try:
        sizes = (("1 KiB", 1024, 10), ("16 KiB", 16 * 1024, 40), ("1 MiB", 1024 * 1024, 64))
        for label, size, records in sizes:
            batch = make_batch(size, records)
            assert len(batch) == size, (len(batch), size)
            count = max(args.mib * 1024 * 1024 // size, 1)
            fsync_count = min(args.fsync_count, count)
            if size >= 1024 * 1024:
                fsync_count = min(fsync_count, 64)
            for fsync in (False, True):
                n = fsync_count if fsync else count
                kind = "+fsync" if fsync else ""
                raw_path = root / f"raw-{size}-{fsync}"
                part = root / f"t{size}{int(fsync)}-0"

                raw_results = []
                tidelog_results = []
                for _ in range(runs):  # interleaved, so both see the same disk state
                    raw_results.append(raw_write(raw_path, batch, n, fsync))
                    raw_path.unlink()
                    shutil.rmtree(part, ignore_errors=True)
                    tidelog_results.append(tidelog_append(part, batch, n, fsync))
                rows.append((f"raw os.write{kind}", label, *min(raw_results)))
                rows.append((f"tidelog append{kind}", label, *min(tidelog_results)))
                if not fsync:
                    rows.append(
                        (
                            "tidelog read 1 MiB fetches",
                            label,
                            *best(runs, lambda p=part: tidelog_read(p, 1 << 20)),
                        )
                    )
                    rows.append(
                        (
                            "tidelog read (regions only)",
                            label,
                            *best(runs, lambda p=part: tidelog_read_regions(p, 1 << 20)),
                        )
                    )
                    rows.append(
                        (
                            "tidelog recovery scan",
                            label,
                            *best(runs, lambda p=part: recovery_scan(p)),
                        )
                    )
                shutil.rmtree(part)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'operation':<30} {'batch':>6} {'MB':>9} {'seconds':>9} {'MB/s':>9} {'batches/s':>11}")
    for name, label, secs, nbytes in rows:
        size = {"1 KiB": 1024, "16 KiB": 16 * 1024}.get(label, 1024 * 1024)
        rate = nbytes / MB / secs if secs > 0 else float("inf")
        print(
            f"{name:<30} {label:>6} {nbytes / MB:>9.1f} {secs:>9.3f} {rate:>9.1f} "
            f"{nbytes / size / secs:>11.0f}"
        )


if __name__ == "__main__":
    main()
