"""Thread CPU of ``Router.dispatch`` for small non-Produce requests, in this process (no socket).

Starts a Broker (temp log dir) on uvloop and times ``--count`` dispatches of each of an
ApiVersions v3 and a Heartbeat v4 (an unknown group: the answer is an error code) through the
real router, awaiting the handler's coroutine: the per-request cost of the generic handler path
(decode, handler, build, encode), which the Produce benches skip (Produce has a lean path).
``PYTHONPATH=<tree>`` picks the code measured, for A/B (run it from outside the trees):

    cd /tmp && PYTHONPATH=/tmp/base .venv/bin/python <repo>/scripts/bench/handler_dispatch.py
"""

from __future__ import annotations

import argparse
import logging
import struct
import tempfile
import time

import uvloop


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    """A flexible request header (v2) and ``body``, without the size prefix."""
    client_id = b"bench"
    head = struct.pack(">hhih", api_key, version, 0, len(client_id)) + client_id + b"\x00"
    return head + body


def _compact(text: bytes) -> bytes:
    return bytes([len(text) + 1]) + text


API_VERSIONS_V3 = _frame(18, 3, _compact(b"bench") + _compact(b"1.0") + b"\x00")
#: group_id, generation_id, member_id, group_instance_id (null), tagged fields
HEARTBEAT_V4 = _frame(12, 4, _compact(b"g") + struct.pack(">i", 1) + _compact(b"m") + b"\x00\x00")


async def _measure(count: int, runs: int) -> None:
    from tidelog.broker.app import Broker
    from tidelog.config.broker import load_broker_config

    logging.getLogger("tidelog.loop").setLevel(logging.ERROR)  # the timed loop holds the loop
    with tempfile.TemporaryDirectory(prefix="handler-dispatch-") as log_dir:
        config = load_broker_config(
            None, [f"log.dirs={log_dir}", "listeners=PLAINTEXT://127.0.0.1:0"], environ={}
        )
        broker = Broker(config)
        await broker.start()
        try:
            for name, frame in (
                ("ApiVersions v3", API_VERSIONS_V3),
                ("Heartbeat v4", HEARTBEAT_V4),
            ):
                figures = []
                for _ in range(runs):
                    started = time.thread_time_ns()
                    for _ in range(count):
                        answer = broker.router.dispatch(frame, "127.0.0.1", 1)
                        if not isinstance(answer, (bytes, list)):
                            await answer
                    figures.append((time.thread_time_ns() - started) / count / 1e3)
                print(f"{name}: thread CPU us/request " + " ".join(f"{f:.1f}" for f in figures))
        finally:
            await broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    uvloop.run(_measure(args.count, args.runs))


if __name__ == "__main__":
    main()
