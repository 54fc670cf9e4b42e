"""Where the time of a consumer's Fetch goes, in-process (no sockets): the table in docs/latency.md.

A started Broker (temp log dir, uvloop) holds ``--records`` 100 B records in batches of
``--batch`` (what ``kcat -P`` writes: librdkafka's batches); the script then fetches the
partition from start to end as kcat 1.7.1 does (librdkafka 2.0.2: Fetch v11, read_committed,
``partition_max_bytes`` 1 MiB, sessionless) through the real router, ``--runs`` times, and
prints CPU microseconds per Fetch (the thread's CPU time: steady on a loaded machine) for:

- ``parse``: the router's lean parse of the frame (``protocol/fast/fetch.py``);
- ``read``: the log read alone (``PartitionLog.read_for_fetch``: the segment and offset-index
  look-up, the walk over the batch headers up to 1 MiB, the aborted transactions);
- ``encode``: the answer's head and tail (``encode_fetch_one`` + ``frame_head``);
- ``dispatch``: all of it as the connection calls it (``Router.dispatch``: parse, handler,
  ``fetch_messages``, encode), answering a ``FileAnswer`` (the records go by ``sendfile``);

and, with ``--profile``, the functions ``dispatch`` spends its time in (cProfile, per Fetch).
The send itself (``FileSender``: the descriptor duplicates, the head, ``sendfile`` of 1 MiB, the
tail) is measured by ``sendfile_cost.py --sizes 1048576``. ``--tree`` runs another checkout's
code, for A/B:

    .venv/bin/python scripts/bench/fetch_cost.py --runs 5
    .venv/bin/python scripts/bench/fetch_cost.py --runs 5 --tree /tmp/before
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_PARTITION_MAX_BYTES = 1048576


def _fetch_v11(topic: str, offset: int, correlation_id: int) -> bytes:
    """A Fetch v11 frame body (no size prefix) as librdkafka 2.0.2 writes it."""
    client = b"rdkafka"
    name = topic.encode()
    out = struct.pack(">hhih", 1, 11, correlation_id, len(client)) + client
    out += struct.pack(">iiiib", -1, 10, 1, 52428800, 1)  # replica, max wait, min, max, isolation
    out += struct.pack(">ii", 0, -1)  # session id, epoch
    out += struct.pack(">ih", 1, len(name)) + name
    out += struct.pack(">iiiqqi", 1, 0, -1, offset, -1, _PARTITION_MAX_BYTES)
    out += struct.pack(">i", 0)  # forgotten topics
    out += struct.pack(">h", 0)  # rack id ""
    return out


async def _main(records: int, batch: int, runs: int, profile: bool) -> None:
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # as the broker does
    from tidelog.broker.app import Broker
    from tidelog.config.broker import load_broker_config
    from tidelog.protocol.fast.answers import encode_fetch_one, frame_head
    from tidelog.protocol.fast.fetch import parse_fetch_frame

    # isort: split
    from produce_cpu import produce_request
    from rawkafka import record_batch

    with tempfile.TemporaryDirectory(prefix="fetch-cost-") as tmp:
        config = load_broker_config(
            None, [f"log.dirs={tmp}", "listeners=PLAINTEXT://127.0.0.1:0"], environ={}
        )
        broker = Broker(config)
        await broker.start()
        try:
            broker.topics.create_topic("consume", 1, {"flush.messages": "9223372036854775807"})
            log = broker.topics.get_log("consume", 0)
            assert log is not None
            router = broker.router
            values = [b"x" * 100] * batch
            frame = produce_request(9, "consume", record_batch(values, 0), 1)[4:]
            for _ in range(records // batch):
                answer = router.dispatch(frame, "h", 1)
                if asyncio.iscoroutine(answer) or isinstance(answer, asyncio.Future):
                    await answer
            end = log.log_end_offset
            # the offsets a consumer fetches at: each answer's next offset
            offsets = []
            offset = 0
            while offset < end:
                offsets.append(offset)
                info = log.read(offset, _PARTITION_MAX_BYTES, upper_bound=end)
                assert info.last_offset is not None
                offset = info.last_offset + 1
            frames = [_fetch_v11("consume", o, i) for i, o in enumerate(offsets)]
            n = len(frames)

            def per_fetch(fn: Any) -> float:
                # CPU time of this thread: steadier than wall time on a loaded machine
                started = time.thread_time()
                for i in range(n):
                    fn(i)
                return (time.thread_time() - started) / n * 1e6

            def parse(i: int) -> None:
                parse_fetch_frame(frames[i])

            def read(i: int) -> None:
                log.read_for_fetch(offsets[i], _PARTITION_MAX_BYTES, read_committed=True)

            def encode(i: int) -> None:
                head, tail = encode_fetch_one(11, "consume", 0, 0, end, 0, 1048000, end, ())
                frame_head(i, False, head, 1048000 + len(tail))

            def dispatch(i: int) -> None:
                answer = router.dispatch(frames[i], "h", 1)
                assert type(answer).__name__ == "FileAnswer", type(answer)

            stages = {"parse": parse, "read": read, "encode": encode, "dispatch": dispatch}
            print(f"{n} fetches of ~1 MiB ({records} records of 100 B, batches of {batch})")
            for name in stages:  # warm up (page cache, read hints, caches)
                per_fetch(stages[name])
            best: dict[str, float] = {}
            for _ in range(runs):
                figures = {name: per_fetch(fn) for name, fn in stages.items()}
                print("  ".join(f"{name} {us:.1f} us" for name, us in figures.items()))
                for name, us in figures.items():
                    best[name] = min(best.get(name, us), us)
            print("min: " + "  ".join(f"{name} {us:.1f} us" for name, us in best.items()))
            if profile:
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(5):
                    for i in range(n):
                        dispatch(i)
                prof.disable()
                stats = pstats.Stats(prof)
                stats.sort_stats("tottime").print_stats(25)
                print(f"(per Fetch: divide by {5 * n})")
        finally:
            await broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--batch", type=int, default=8_000, help="records per batch (~870 KB)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--tree", type=Path, default=HERE.parent.parent)
    args = parser.parse_args()
    sys.path[:0] = [str(args.tree.resolve()), str(HERE)]
    import uvloop

    uvloop.run(_main(args.records, args.batch, args.runs, args.profile))


if __name__ == "__main__":
    main()
