"""System calls per request of ``tidelog serve``, counted by ``strace -c -f -p PID``.

    .venv/bin/python scripts/bench/request_syscalls.py [--count 5000] [--runs 3] [--base-tree DIR]

Workloads (the broker's threads all counted; strace attached only while a workload runs):

- ``produce page-cache``: ``rawkafka.py``'s client, one Produce v7 (100 B, acks=-1) in flight,
  a topic with page-cache acks (answered without a task);
- ``produce durable``: the same on a topic with the default (fsync) acks: the handler waits for
  the group commit, so its answer goes through a task;
- ``kcat produce``: ``kcat -P`` of ``--count`` x 10 records of 100 B, 10 to a request
  (``batch.num.messages=10``, ``linger.ms=0``), many requests in flight: per 1000 records;
- ``kcat consume``: ``kcat -C`` of ``--count`` x 10 records of 100 B (written beforehand by
  ``kcat -P``), per 1000 records (librdkafka's fetches: FileAnswers sent by ``sendfile``).

``--base-tree DIR`` runs another checkout's code as ``base``, alternating with this tree's in
every run. Prints calls per request (per 1000 records for consume), the median of the runs,
and the most frequent system calls of the last run.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rawkafka import ProduceLatencyClient
from servers import Tidelog
from workloads import create_topic


def _strace(pid: int, out: Path, work: Callable[[], None]) -> dict[str, int]:
    """Calls by system call name while ``work()`` runs in ``pid`` (all its threads)."""
    tracer = subprocess.Popen(
        ["strace", "-c", "-f", "-p", str(pid), "-o", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert tracer.stderr is not None
    # strace reports each attached thread on stderr; the first line means it is attached
    # (the others follow at once).
    tracer.stderr.readline()
    time.sleep(0.3)  # the broker's other threads
    work()
    tracer.send_signal(signal.SIGINT)
    tracer.wait(30)
    calls: dict[str, int] = {}
    for line in out.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            calls[fields[-1]] = int(fields[3])
    return calls


def _produce(broker: Tidelog, topic: str, count: int) -> Callable[[], None]:
    def work() -> None:
        client = ProduceLatencyClient("127.0.0.1", broker.port, topic, acks=-1)
        try:
            for _ in range(count):
                client.produce_once()
        finally:
            client.close()

    return work


def _kcat_produce(broker: Tidelog, records: int) -> Callable[[], None]:
    def work() -> None:
        subprocess.run(
            [
                *("kcat", "-P", "-b", broker.bootstrap, "-t", "pipelined", "-p", "0"),
                *("-X", "linger.ms=0", "-X", "batch.num.messages=10"),
            ],
            input=b"".join(b"%099d\n" % i for i in range(records)),
            check=True,
        )

    return work


def _consume(broker: Tidelog, records: int) -> Callable[[], None]:
    def work() -> None:
        subprocess.run(
            [
                *("kcat", "-C", "-b", broker.bootstrap, "-t", "consume", "-p", "0"),
                *("-o", "beginning", "-c", str(records), "-e", "-q", "-f", "%o\n"),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    return work


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=5000, help="produce requests per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--base-tree", type=Path, default=None, help="another checkout, as 'base'")
    args = ap.parse_args(argv)
    records = args.count * 10
    workloads = ("produce page-cache", "produce durable", "kcat produce", "kcat consume")
    per: dict[tuple[str, str], list[float]] = {}
    last: dict[tuple[str, str], dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="request-syscalls-") as tmp:
        brokers = {"tidelog": Tidelog("tidelog", Path(tmp) / "tidelog")}
        if args.base_tree is not None:
            brokers["base"] = Tidelog("base", Path(tmp) / "base", tree=args.base_tree)
        try:
            for broker in brokers.values():
                broker.start()
                create_topic(broker.bootstrap, "cache", {"flush.messages": "9223372036854775807"})
                create_topic(broker.bootstrap, "durable")
                create_topic(broker.bootstrap, "consume")
                create_topic(
                    broker.bootstrap, "pipelined", {"flush.messages": "9223372036854775807"}
                )
                subprocess.run(
                    ["kcat", "-P", "-b", broker.bootstrap, "-t", "consume", "-p", "0"],
                    input=b"".join(b"%099d\n" % i for i in range(records)),
                    check=True,
                )
                _produce(broker, "cache", 500)()  # warm up
                _produce(broker, "durable", 200)()
            for run in range(args.runs):
                names = list(brokers) if run % 2 == 0 else list(reversed(brokers))
                for name in names:
                    broker = brokers[name]
                    for workload, work, unit in (
                        ("produce page-cache", _produce(broker, "cache", args.count), args.count),
                        ("produce durable", _produce(broker, "durable", args.count), args.count),
                        ("kcat produce", _kcat_produce(broker, records), records / 1000),
                        ("kcat consume", _consume(broker, records), records / 1000),
                    ):
                        calls = _strace(broker.pid, Path(tmp) / "strace.txt", work)
                        per.setdefault((name, workload), []).append(sum(calls.values()) / unit)
                        last[(name, workload)] = calls
        finally:
            for broker in brokers.values():
                broker.stop()
    load = os.getloadavg()
    print(
        f"request_syscalls.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, medians of {args.runs} runs, "
        f"{args.count} produce requests, {records} records consumed\n"
    )
    print("| workload | " + " | ".join(brokers) + " |")
    print("|---|" + "---:|" * len(brokers))
    for workload in workloads:
        unit = " (per 1000 records)" if workload.startswith("kcat") else " (per request)"
        cells = [f"{statistics.median(per[(n, workload)]):.2f}" for n in brokers]
        print(f"| {workload}{unit} | " + " | ".join(cells) + " |")
    for (name, workload), calls in last.items():
        unit = records / 1000 if workload.startswith("kcat") else args.count
        top = sorted(calls.items(), key=lambda kv: -kv[1])[:8]
        print(f"\n{name}, {workload}: " + ", ".join(f"{k} {v / unit:.2f}" for k, v in top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
