"""Durable vs plain produce with confluent-kafka (acks=all, linger.ms=5), 100 B and 1 KiB.

The suite's ``durable-100`` / ``durable-1k`` drive kcat; this drives confluent-kafka from one
Python process, the other common client. One broker (``.venv/bin/tidelog serve``); per run and
size, a plain topic (``flush.messages=9223372036854775807``) then a durable one (the defaults).
Prints one line per measurement and the medians:

    .venv/bin/python scripts/bench/durable_ck.py --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import servers
import workloads as wl

PLAIN = {"flush.messages": str(2**63 - 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--count-100", type=int, default=500_000)
    p.add_argument("--count-1k", type=int, default=200_000)
    args = p.parse_args()
    rates: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="durable-ck-") as tmp:
        server = servers.Tidelog("tidelog", Path(tmp), kcat_ok=True, fsync_config=True)
        server.start()
        try:
            for run in range(args.runs):
                for size, count in ((100, args.count_100), (1024, args.count_1k)):
                    for label, configs in (("plain", PLAIN), ("durable", {})):
                        topic = f"ck-{label}-{size}-{run}"
                        wl.create_topic(server.bootstrap, topic, configs)
                        cpu = server.cpu_seconds()
                        result = wl.ck_produce(
                            server.bootstrap, topic, count, size, acks="all", linger_ms=5
                        )
                        rate = float(result["msgs_per_s"])
                        rates.setdefault((label, size), []).append(rate)
                        used = server.cpu_seconds() - cpu
                        print(
                            f"run {run + 1} {label:7} {size:5} B: {rate:>9,.0f} msg/s, broker "
                            f"CPU {used:.2f} s, load {os.getloadavg()[0]:.1f}",
                            flush=True,
                        )
        finally:
            server.stop()
    for size in (100, 1024):
        plain = statistics.median(rates[("plain", size)])
        durable = statistics.median(rates[("durable", size)])
        print(
            f"median {size:5} B: plain {plain:,.0f}, durable {durable:,.0f} msg/s "
            f"({durable / plain:.0%})"
        )


if __name__ == "__main__":
    main()
