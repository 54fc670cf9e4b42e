"""In-process cost of the long-poll cycle a consumer at the tail drives (no sockets).

One cycle: a Fetch v16 at the log end offset arrives and waits, a one-record Produce v10 is
appended and wakes it, the fetch is answered (``--partitions N``: the fetch names N partitions
of the topic, as a librdkafka consumer assigned N does; the produce writes to partition 0). The
script runs ``--count`` cycles through the real router of a started Broker (temp log dir) on
uvloop, then the same number of produces alone, and prints microseconds per cycle, per produce,
and their difference (the fetch's share: parse, scan, wait, wake, read, answer), in wall time
and in the CPU time of the loop's thread (steady on a loaded machine: prefer it for A/B).
``--tree`` runs another checkout's code, for A/B.

    .venv/bin/python scripts/bench/poll_cycle.py --count 2000 --runs 3
    .venv/bin/python scripts/bench/poll_cycle.py --count 2000 --runs 3 --tree /tmp/before

Socket costs (recv, send, epoll: ~15-20 us per request on this machine, see RESULTS.md) come on
top; the figures compare code, not wall latency.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _fetch_frame(
    topic_id: Any, offset: int, isolation_level: int = 1, partitions: int = 1
) -> bytes:
    from kio.schema.fetch.v16 import request as f16
    from kio.serial import entity_writer

    request = f16.FetchRequest(
        replica_state=f16.ReplicaState(replica_id=-1, replica_epoch=-1),
        max_wait=timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=52428800,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=(
            f16.FetchTopic(
                topic_id=topic_id,
                partitions=tuple(
                    f16.FetchPartition(
                        partition=i,
                        current_leader_epoch=-1,
                        fetch_offset=offset if i == 0 else 0,  # only partition 0 is written
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1048576,
                    )
                    for i in range(partitions)
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    header_cls = type(request).__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(
        buffer,
        header_cls(
            request_api_key=1, request_api_version=16, correlation_id=1, client_id="rdkafka"
        ),
    )
    entity_writer(type(request))(buffer, request)
    return buffer.getvalue()


def _start(outcome: Any) -> Any:
    """What the server does with what ``Router.dispatch`` returned: an answer as is, a future
    (a long poll) awaited, a coroutine stepped once and finished in a task if it waits."""
    if isinstance(outcome, asyncio.Future) or not asyncio.iscoroutine(outcome):
        return outcome
    try:
        from tidelog.broker.eager import finish as _finish
    except ImportError:  # a --tree from before broker/eager.py
        from tidelog.broker.server import _finish  # type: ignore[attr-defined,no-redef]

    try:
        waiting_on = outcome.send(None)
    except StopIteration as done:
        return done.value
    return asyncio.ensure_future(_finish(outcome, waiting_on))


async def _main(count: int, runs: int, isolation_level: int, partitions: int) -> None:
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # as the broker does
    from tidelog.broker.app import Broker
    from tidelog.config.broker import load_broker_config

    # isort: split
    # (after the broker: produce_cpu puts scripts/bench, which has a storage.py, first on the path)
    from produce_cpu import produce_request
    from rawkafka import record_batch

    with tempfile.TemporaryDirectory(prefix="poll-cycle-") as tmp:
        config = load_broker_config(
            None, [f"log.dirs={tmp}", "listeners=PLAINTEXT://127.0.0.1:0"], environ={}
        )
        broker = Broker(config)
        await broker.start()
        try:
            # page-cache acks: this measures the long-poll cycle, not the fsync
            info = broker.topics.create_topic(
                "cycle", partitions, {"flush.messages": "9223372036854775807"}
            )
            log = broker.topics.get_log("cycle", 0)
            assert log is not None
            total = (2 * runs + 1) * count + 10
            fetches = [
                _fetch_frame(info.topic_id, offset, isolation_level, partitions)
                for offset in range(total)
            ]
            produce = produce_request(10, "cycle", record_batch([b"x" * 100], 0), 1)[4:]
            router = broker.router

            async def cycles(n: int, with_fetch: bool) -> tuple[float, float]:
                started = time.perf_counter()
                cpu_started = time.thread_time()
                for _ in range(n):
                    waiting = None
                    if with_fetch:
                        waiting = _start(router.dispatch(fetches[log.log_end_offset], "h", 1))
                        assert isinstance(waiting, asyncio.Future), "the fetch did not wait"
                    answer = _start(router.dispatch(produce, "h", 1))
                    assert not isinstance(answer, asyncio.Future), "the produce waited"
                    if waiting is not None:
                        await waiting
                wall = (time.perf_counter() - started) / n * 1e6
                return wall, (time.thread_time() - cpu_started) / n * 1e6

            await cycles(min(count, 200), True)
            for _ in range(runs):
                both, both_cpu = await cycles(count, True)
                alone, alone_cpu = await cycles(count, False)
                print(
                    f"cycle {both:.1f} us, produce alone {alone:.1f} us, "
                    f"fetch long poll {both - alone:.1f} us; CPU (the loop thread's): cycle "
                    f"{both_cpu:.1f} us, produce alone {alone_cpu:.1f} us, "
                    f"fetch long poll {both_cpu - alone_cpu:.1f} us"
                )
        finally:
            await broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tree", type=Path, default=HERE.parent.parent)
    parser.add_argument(
        "--isolation-level",
        type=int,
        choices=(0, 1),
        default=1,
        help="the Fetch's isolation_level: 1 read_committed (librdkafka's default), 0 uncommitted",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="partitions the fetch names (librdkafka fetches all it is assigned in one request); "
        "the produce writes to partition 0",
    )
    args = parser.parse_args()
    sys.path[:0] = [str(args.tree.resolve()), str(HERE)]
    import uvloop

    uvloop.run(_main(args.count, args.runs, args.isolation_level, args.partitions))


if __name__ == "__main__":
    main()
