"""Cleaning throughput on a generated log: ``python scripts/bench/cleaner.py [--mb 100]``.

Writes a compacted partition of about ``--mb`` MB (keys drawn from ``--keys`` distinct keys,
``--value-bytes`` per value, ``--batch`` records per batch, codec ``--codec``) through
``PartitionLog.append`` into a temporary log dir, rolls it, then times one cleaning pass (offset
map + rewrite + swaps) and prints the figures: MB read per second over the whole pass, bytes
before and after, records before and after. A second pass (nothing dirty: the clean part is
re-read and copied) is timed too.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from tidelog.storage.cleaner.config import CompactionConfig
from tidelog.storage.cleaner.log_cleaner import LogCleaner
from tidelog.storage.config import LogConfig
from tidelog.storage.manager import LogManager
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord

__all__ = ["main"]

MB = 1_000_000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--codec", default="none")
    parser.add_argument("--segment-mb", type=int, default=16)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="tidelog-cleaner-bench-", dir=args.dir))
    try:
        run(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(root: Path, args: argparse.Namespace) -> None:
    config = LogConfig(segment_bytes=args.segment_mb * MB, cleanup_policy="compact")
    manager = LogManager([root], default_config=config)
    manager.startup()
    log = manager.create_log("bench", 0, config, uuid.uuid4())
    rnd = random.Random(42)
    value = rnd.randbytes(args.value_bytes)
    written = 0
    records = 0
    started = time.monotonic()
    while written < args.mb * MB:
        recs = [
            NewRecord(f"key-{rnd.randrange(args.keys):08d}".encode(), value, (), 1_700_000_000_000)
            for _ in range(args.batch)
        ]
        info = log.append(encode_batch(recs, compression=args.codec))
        written += info.size_in_bytes
        records += len(recs)
    log.roll()
    log.flush()
    print(
        f"wrote {written / MB:.1f} MB, {records} records, {len(log.segments()) - 1} segments "
        f"in {time.monotonic() - started:.1f}s"
    )
    cleaner = LogCleaner(
        manager, compaction_config=lambda _log: CompactionConfig(delete_retention_ms=0)
    )
    for label in ("first pass", "second pass"):
        before = log.size_in_bytes
        t0 = time.monotonic()
        result = cleaner.clean_log(log)
        seconds = time.monotonic() - t0
        assert result is not None
        stats = result.stats
        read = stats.map_bytes_read + stats.bytes_read
        print(
            f"{label}: {seconds:.2f}s (map {stats.map_seconds:.2f}s), "
            f"{stats.bytes_read / MB / seconds:.1f} MB/s of log cleaned "
            f"({read / MB / seconds:.1f} MB/s read incl. the offset map), "
            f"{before / MB:.1f} -> {log.size_in_bytes / MB:.2f} MB, "
            f"{stats.messages_read} -> {stats.messages_written} records, "
            f"{stats.groups_swapped} swap(s)"
        )
    manager.shutdown()


if __name__ == "__main__":
    main()
