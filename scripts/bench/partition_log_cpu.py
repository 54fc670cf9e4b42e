"""CPU time of PartitionLog's own work: a small append, a 64 KiB read, an unclean open.

In-process, no broker: appends ``--count`` batches of 200 bytes (2 records) to a new log,
then reads the log from offset 0 in 64 KiB reads (best of 5 passes), then closes it, deletes
its index and snapshot files and opens it again as after a crash (every batch scanned, the
producer state replayed). Prints CPU microseconds (``time.process_time``) per append and per
read and CPU milliseconds for the open, which a shared machine's load disturbs less than wall
time. ``--tree`` runs another checkout's ``storage/`` (an A/B of a storage change: alternate
the two trees a few times and compare the best figures).

    .venv/bin/python scripts/bench/partition_log_cpu.py [--tree DIR] [--count 50000]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tree", type=Path, default=HERE.parents[2], help="checkout to measure")
    parser.add_argument("--count", type=int, default=50_000, help="appends measured")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="where the log is written")
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    storage = importlib.import_module("tidelog.storage")  # the tree's
    assert storage.__file__ is not None and storage.__file__.startswith(str(args.tree.resolve()))
    # scripts/bench/storage.py's batch maker (by path: the tree's ``storage/`` shadows the name)
    spec = importlib.util.spec_from_file_location("storage_bench", HERE.parent / "storage.py")
    assert spec is not None and spec.loader is not None
    storage_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(storage_bench)
    batch = storage_bench.make_batch(200, 2)
    root = Path(tempfile.mkdtemp(dir=args.dir, prefix=".partition-log-cpu-"))
    try:
        directory = root / "t-0"
        log = storage.PartitionLog(directory, storage.LogConfig())
        for _ in range(2_000):  # warm-up
            log.append(batch)
        started = time.process_time()
        for _ in range(args.count):
            log.append(batch)
        append_us = (time.process_time() - started) / args.count * 1e6
        read_us = float("inf")
        for _ in range(5):
            started = time.process_time()
            offset = reads = 0
            while offset < log.log_end_offset:
                offset = log.read(offset, 64 * 1024).last_offset + 1
                reads += 1
            read_us = min(read_us, (time.process_time() - started) / reads * 1e6)
        log.close()
        for pattern in ("*.index", "*.timeindex", "*.snapshot"):
            for path in directory.glob(pattern):
                path.unlink()
        started = time.process_time()
        storage.PartitionLog(directory, storage.LogConfig(), recovery_point=0).close()
        open_ms = (time.process_time() - started) * 1e3
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"{args.tree}: append {append_us:.2f} us, read 64 KiB {read_us:.1f} us, "
        f"unclean open of {args.count + 2_000} batches {open_ms:.1f} ms (CPU time)"
    )


if __name__ == "__main__":
    main()
