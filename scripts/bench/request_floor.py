"""What one page-cache Produce costs in tidelog, against the floor of any Python asyncio broker.

    .venv/bin/python scripts/bench/request_floor.py [--count 20000] [--runs 3] [--base-tree DIR]

Three figures, each the median of ``--runs``:

- ``floor``: a minimal uvloop ``asyncio.Protocol`` in a process of its own that answers every
  request frame with a fixed ProduceResponse v7 after one ``pwritev`` of the frame's tail to a
  file: the event loop, the socket calls and the write that every Python broker pays, and
  nothing else;
- ``tidelog``: ``tidelog serve`` on a topic with page-cache acks
  (``flush.messages=9223372036854775807``);
- ``dispatch``: in this process, the thread CPU of ``Router.dispatch`` on a Produce v10 frame of
  one 100 B record, acks=-1, page-cache topic (parse, append, answer; no socket, no loop turn).

``--base-tree DIR`` adds ``base``: ``tidelog serve`` running another checkout's code (a ``git
archive`` of the commit before a change), visited in turn with the others in every run.

The servers are driven by the same hand-built blocking client (``rawkafka.py``: one Produce
v7 in flight), which gives the round trip's p50 / p99 and the server's CPU (utime + stime from
``/proc``) per request. Figures that depend on the machine's load: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from produce_stages import stages
from rawkafka import ProduceLatencyClient
from servers import Tidelog, free_port, wait_port
from workloads import create_topic

_SIZE = struct.Struct(">i")
TOPIC = "floor"


class FloorProtocol(asyncio.Protocol):
    """The floor server's connection: frames in, a fixed Produce v7 answer out."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        name = TOPIC.encode()
        self._answer_tail = (
            struct.pack(">ih", 1, len(name))
            + name
            + struct.pack(">iihqqq", 1, 0, 0, 0, -1, 0)  # partition 0: ok, offset, time, start
            + struct.pack(">i", 0)  # throttle time
        )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= 4:
            (size,) = _SIZE.unpack_from(buffer, 0)
            if len(buffer) < 4 + size:
                return
            frame = bytes(buffer[4 : 4 + size])
            del buffer[: 4 + size]
            os.pwritev(self._fd, [frame[-100:]], 0)
            body = frame[4:8] + self._answer_tail  # correlation id + body
            assert self._transport is not None
            self._transport.write(_SIZE.pack(len(body)) + body)


def serve_floor(port: int, path: str) -> None:
    import uvloop

    async def main() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: FloorProtocol(fd), "127.0.0.1", port)
        await server.serve_forever()

    uvloop.run(main())


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_trips(pid: int, port: int, count: int) -> tuple[float, float, float]:
    """p50 and p99 (us) of ``count`` produce round trips, and the server's CPU us per request."""
    client = ProduceLatencyClient("127.0.0.1", port, TOPIC, acks=-1)
    try:
        for _ in range(500):
            client.produce_once()
        cpu0 = _cpu_s(pid)
        samples = sorted(client.produce_once() / 1e3 for _ in range(count))
        cpu = _cpu_s(pid) - cpu0
    finally:
        client.close()
    return samples[count // 2], samples[int(count * 0.99)], cpu / count * 1e6


def dispatch_cpu_us(count: int, runs: int) -> float:
    """Thread CPU us per ``Router.dispatch`` of a page-cache Produce v10 (in this process; the
    row of ``produce_stages.py``)."""
    return stages(count, runs)["Router.dispatch"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=20_000, help="timed requests per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--base-tree", type=Path, default=None, help="another checkout, as 'base'")
    ap.add_argument("--serve-floor", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_floor is not None:
        serve_floor(args.serve_floor, os.environ["FLOOR_FILE"])
        return 0
    rows: dict[str, list[tuple[float, float, float]]] = {"floor": [], "tidelog": []}
    if args.base_tree is not None:
        rows["base"] = []
    with tempfile.TemporaryDirectory(prefix="request-floor-") as tmp:
        port = free_port()
        floor = subprocess.Popen(
            [sys.executable, __file__, "--serve-floor", str(port)],
            env={**os.environ, "FLOOR_FILE": str(Path(tmp) / "floor.log")},
        )
        brokers = {"tidelog": Tidelog("tidelog", Path(tmp) / "tidelog")}
        if args.base_tree is not None:
            brokers["base"] = Tidelog("base", Path(tmp) / "base", tree=args.base_tree)
        try:
            wait_port(port, floor, 30.0)
            for broker in brokers.values():
                broker.start()
                create_topic(broker.bootstrap, TOPIC, {"flush.messages": "9223372036854775807"})
            for _ in range(args.runs):
                rows["floor"].append(round_trips(floor.pid, port, args.count))
                for name, broker in brokers.items():
                    rows[name].append(round_trips(broker.pid, broker.port, args.count))
        finally:
            floor.terminate()
            floor.wait(10)
            for broker in brokers.values():
                broker.stop()
    dispatch = dispatch_cpu_us(args.count, args.runs)
    load = os.getloadavg()
    print(
        f"request_floor.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, medians of {args.runs} runs x "
        f"{args.count} requests\n"
    )
    print("| server | round trip p50, us | p99, us | server CPU per request, us |")
    print("|---|---:|---:|---:|")
    for name, values in rows.items():
        p50, p99, cpu = (statistics.median(v[i] for v in values) for i in range(3))
        print(f"| {name} | {p50:.0f} | {p99:.0f} | {cpu:.1f} |")
    print(f"\nRouter.dispatch of one page-cache Produce v10, thread CPU: {dispatch:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
