"""Where the microseconds of one page-cache Produce go, stage by stage (thread CPU, in process).

    .venv/bin/python scripts/bench/produce_stages.py [--count 20000] [--runs 5]
    PYTHONPATH=/tmp/base .venv/bin/python scripts/bench/produce_stages.py   # another tree

A Produce v10 of one 100 B record, acks=-1, to a page-cache topic
(``flush.messages=9223372036854775807``): each stage is run ``--count`` times in a loop of its
own and timed with ``time.thread_time_ns`` (the median of ``--runs``), so the figures do not
depend on the machine's load the way latencies do:

- ``frame``: the connection's framing (``FrameReader.feed`` + ``next_frame``);
- ``header + parse``: ``codec.peek_request_header`` and the lean Produce parser
  (``protocol/fast/produce.py``);
- ``checks``: what ``answer_at_once`` looks up before appending (the partition's log, the append
  queue, ``needs_worker``);
- ``log append``: ``append_records.append_partition`` (batch checks, ``PartitionLog.append``:
  the ``pwritev`` of the batch, the index, the metrics, the flush scheduling);
- ``answer encode``: the framed ProduceResponse (``_encode_one`` + ``frame_answer``);
- ``Router.dispatch``: all of the above but framing, plus the dispatch itself;
- ``connection``: ``KafkaConnection.data_received`` with a transport that drops the answer
  (framing, dispatch, the connection's bookkeeping, the write call).

The loop and the socket are the rest of the server's CPU per request measured over a socket
(``request_floor.py``'s ``tidelog`` row) minus ``connection``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from produce_cpu import produce_request
from rawkafka import record_batch

TOPIC = "stages"


class _NullTransport:
    """A transport that accepts every write and drops it."""

    def write(self, data: Any) -> None:
        pass

    def writelines(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default


def _timed(fn: Callable[[], Any], count: int, runs: int) -> float:
    figures = []
    for _ in range(runs):
        started = time.thread_time_ns()
        for _ in range(count):
            fn()
        figures.append((time.thread_time_ns() - started) / count / 1e3)
    return statistics.median(figures)


def stages(count: int, runs: int) -> dict[str, float]:
    import uvloop

    from tidelog.broker import server as server_module
    from tidelog.broker.app import Broker
    from tidelog.broker.append_records import append_partition, needs_worker
    from tidelog.broker.handlers import produce
    from tidelog.broker.network_receive import FrameReader
    from tidelog.config.broker import load_broker_config
    from tidelog.protocol import codec
    from tidelog.protocol.fast.answers import frame_answer
    from tidelog.protocol.fast.produce import parse_produce_frame

    logging.getLogger("tidelog.loop").setLevel(logging.ERROR)

    async def main() -> dict[str, float]:
        with tempfile.TemporaryDirectory(prefix="produce-stages-") as log_dir:
            config = load_broker_config(
                None, [f"log.dirs={log_dir}", "listeners=PLAINTEXT://127.0.0.1:0"], environ={}
            )
            broker = Broker(config)
            await broker.start()
            try:
                broker.topics.create_topic(TOPIC, 1, {"flush.messages": "9223372036854775807"})
                batch = record_batch([b"x" * 100], int(time.time() * 1000))
                framed = produce_request(10, TOPIC, batch, -1)
                frame = memoryview(framed)[4:]
                lean = parse_produce_frame(frame)
                assert lean is not None
                request = lean[2]
                records = request.topic_data[0].partition_data[0][1]
                partition_log = broker.topics.get_log(TOPIC, 0)
                assert partition_log is not None
                result = append_partition(broker, TOPIC, 0, records, partition_log)
                reader = FrameReader(100 << 20)

                def frame_stage() -> None:
                    reader.feed(framed)
                    reader.next_frame()
                    reader.next_frame()

                def parse_stage() -> None:
                    codec.peek_request_header(frame)
                    parse_produce_frame(frame)

                def checks_stage() -> None:
                    log = broker.topics.get_log(TOPIC, 0)
                    broker.append_queue.busy((TOPIC, 0))
                    needs_worker(log, records)  # type: ignore[arg-type]

                def append_stage() -> None:
                    append_partition(broker, TOPIC, 0, records, partition_log)

                def encode_stage() -> None:
                    frame_answer(7, True, produce._encode_one(10, result))  # type: ignore[arg-type]

                dispatch = broker.router.dispatch

                def dispatch_stage() -> None:
                    dispatch(frame, "127.0.0.1", 40000)

                try:
                    listener = server_module.ListenerServer(
                        "PLAINTEXT", "127.0.0.1", 0, broker.router, 100 << 20, broker=broker
                    )
                except TypeError:  # a tree from before ListenerServer took the broker
                    listener = server_module.ListenerServer(
                        "PLAINTEXT", "127.0.0.1", 0, broker.router, 100 << 20
                    )
                connection = server_module.KafkaConnection(listener)
                connection.connection_made(_NullTransport())  # type: ignore[arg-type]
                received = connection.data_received

                def connection_stage() -> None:
                    received(framed)

                figures = {}
                for name, fn in (
                    ("frame", frame_stage),
                    ("header + parse", parse_stage),
                    ("checks", checks_stage),
                    ("log append", append_stage),
                    ("answer encode", encode_stage),
                    ("Router.dispatch", dispatch_stage),
                    ("connection", connection_stage),
                ):
                    fn()
                    figures[name] = _timed(fn, count, runs)
                    await asyncio.sleep(0)
                return figures
            finally:
                await broker.stop()

    return uvloop.run(main())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=20_000, help="iterations per stage and run")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    figures = stages(args.count, args.runs)
    load = os.getloadavg()
    import tidelog

    print(
        f"produce_stages.py ({Path(tidelog.__file__).resolve().parent.parent}), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load[0]:.1f} {load[1]:.1f} "
        f"{load[2]:.1f}, medians of {args.runs} runs x {args.count}\n"
    )
    print("| stage | thread CPU, us |")
    print("|---|---:|")
    for name, us in figures.items():
        print(f"| {name} | {us:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
