"""Where one transaction's time goes: Kafka's Java client (transaction version 2) traced.

    .venv/bin/python scripts/bench/transactions_trace.py [--records 5000] [--tree DIR]
        [--keep FILE]

Starts ``tidelog serve`` (default settings: durable acknowledgements; ``--tree`` runs another
checkout), runs ``java/TxnBench.java`` (transactions of 100 records of 1 KiB, one partition)
once untimed to warm the JIT, then again with ``strace -f -tt -T`` attached to the broker
(socket reads and writes, ``pwritev2``, ``fsync``). From the trace, per transaction (median and
p90 over the transactions whose Produce arrived in one request), the hops between: the
Produce's arrival, the Ongoing record's append to ``__transaction_state``, its fsync, the
records' append and fsync, the Produce answer, EndTxn's arrival, the PrepareCommit append and
fsync, the COMMIT marker's append, EndTxn's answer, and the client's own time until its next
request. strace slows every system call of the broker (tens of us each): the hops are for
comparing trees in one run and for finding the waits, not absolute figures.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.support.jvm

import servers
from transactions import Java

TRACED = "trace=read,write,pwritev2,fsync"
LINE = re.compile(r"(\d+) +(\d+):(\d+):([\d.]+) (.*)")


@dataclass(frozen=True, slots=True)
class Call:
    """One system call: start (ms), duration (ms), name, what (T: __transaction_state, P:
    the data partition, S: the client's socket), its return value (bytes)."""

    start_ms: float
    duration_ms: float
    name: str
    what: str
    size: int


def parse(text: str) -> list[Call]:
    calls: list[Call] = []
    unfinished: dict[str, tuple[float, str]] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m is None:
            continue
        tid, h, mi, s, rest = m.groups()
        at = (int(h) * 3600 + int(mi) * 60 + float(s)) * 1000
        if "<unfinished" in rest:
            unfinished[tid] = (at, rest.split(" <unfinished")[0])
            continue
        if "resumed>" in rest:
            at, head = unfinished.pop(tid, (at, ""))
            rest = head + rest.split("resumed>", 1)[1]
        fd = re.search(r"\(\d+<([^>]*)>", rest)
        target = fd.group(1) if fd else ""
        if not target or "eventfd" in target:
            continue
        duration = re.search(r"<([\d.]+)>\s*$", rest)
        size = re.search(r"= (-?\d+)", rest)
        what = "T" if "__transaction_state" in target else "S" if "socket" in target else "P"
        calls.append(
            Call(
                at,
                float(duration.group(1)) * 1000 if duration else 0.0,
                rest.split("(", 1)[0],
                what,
                int(size.group(1)) if size else 0,
            )
        )
    calls.sort(key=lambda c: c.start_ms)
    return calls


def _first(calls: list[Call], after: float, name: str, what: str, small: bool | None) -> Call:
    for c in calls:
        if (
            c.start_ms >= after
            and c.name == name
            and c.what == what
            and (small is None or (c.size < 1000) == small)
        ):
            return c
    raise LookupError(name)


def hops(calls: list[Call]) -> dict[str, list[float]]:
    """Per transaction, the hops (ms) of the module's list."""
    produce_reads = [
        i for i, c in enumerate(calls) if c.name == "read" and c.what == "S" and c.size > 100_000
    ]
    rows: dict[str, list[float]] = {}
    for i, j in itertools.pairwise(produce_reads):
        txn = calls[i:j]
        read = txn[0]
        t0 = read.start_ms + read.duration_ms
        try:
            ongoing = _first(txn, t0, "pwritev2", "T", True)
            records = _first(txn, t0, "pwritev2", "P", False)
            ongoing_fsync = _first(txn, ongoing.start_ms, "fsync", "T", None)
            records_fsync = _first(txn, records.start_ms, "fsync", "P", None)
            answer = _first(txn, t0, "write", "S", True)
            end_read = _first(txn, answer.start_ms, "read", "S", True)
            prepare = _first(txn, end_read.start_ms, "pwritev2", "T", True)
            prepare_fsync = _first(txn, prepare.start_ms, "fsync", "T", None)
            marker = _first(txn, prepare.start_ms, "pwritev2", "P", True)
            end_answer = _first(txn, marker.start_ms, "write", "S", True)
        except LookupError:
            continue
        for name, value in (
            ("Produce arrives -> Ongoing appended", ongoing.start_ms - t0),
            ("Produce arrives -> records appended", records.start_ms - t0),
            ("Ongoing appended -> its fsync starts", ongoing_fsync.start_ms - ongoing.start_ms),
            ("fsync of Ongoing", ongoing_fsync.duration_ms),
            ("records appended -> their fsync starts", records_fsync.start_ms - records.start_ms),
            ("fsync of the records", records_fsync.duration_ms),
            (
                "records' fsync returns -> Produce answered",
                answer.start_ms - records_fsync.start_ms - records_fsync.duration_ms,
            ),
            ("Produce: arrival -> answer", answer.start_ms - t0),
            ("client: Produce answer -> EndTxn arrives", end_read.start_ms - answer.start_ms),
            ("EndTxn arrives -> PrepareCommit appended", prepare.start_ms - end_read.start_ms),
            (
                "PrepareCommit appended -> its fsync starts",
                prepare_fsync.start_ms - prepare.start_ms,
            ),
            ("fsync of PrepareCommit", prepare_fsync.duration_ms),
            (
                "PrepareCommit's fsync returns -> marker appended",
                marker.start_ms - prepare_fsync.start_ms - prepare_fsync.duration_ms,
            ),
            ("marker appended -> EndTxn answered", end_answer.start_ms - marker.start_ms),
            ("EndTxn: arrival -> answer", end_answer.start_ms - end_read.start_ms),
            (
                "client: EndTxn answer -> next Produce arrives",
                calls[j].start_ms - end_answer.start_ms,
            ),
            ("transaction: Produce arrival -> next Produce arrival", calls[j].start_ms - t0),
        ):
            rows.setdefault(name, []).append(value)
        in_txn = [c for c in txn if c.name == "fsync"]
        rows.setdefault("fsyncs per transaction", []).append(float(len(in_txn)))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=5000)
    p.add_argument("--tree", type=Path, help="run the broker of another checkout")
    p.add_argument("--keep", type=Path, help="keep the raw strace output here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tidelog-txn-trace-") as work:
        java = Java.build(Path(work))
        server = servers.Tidelog("tidelog", Path(work) / "broker")
        server.tree = args.tree.resolve() if args.tree else None
        server.start()
        out = Path(work) / "strace.txt"
        try:
            java.run(server.bootstrap, "warm", "transactional", args.records, 1024, 100)
            tracer = subprocess.Popen(
                [
                    "strace",
                    "-f",
                    "-tt",
                    "-T",
                    "-y",
                    "-o",
                    str(out),
                    "-e",
                    TRACED,
                    "-p",
                    str(server.pid),
                ],
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)  # strace attaches to every thread
            java.run(server.bootstrap, "traced", "transactional", args.records, 1024, 100)
            tracer.terminate()
            tracer.wait()
        finally:
            server.stop()
        text = out.read_text()
        if args.keep:
            args.keep.write_text(text)
    rows = hops(parse(text))
    count = len(rows.get("fsyncs per transaction", []))
    print(f"{count} transactions (one Produce each), ms: median / p90")
    print("| hop | median | p90 |\n|---|---:|---:|")
    for name, values in rows.items():
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
        print(f"| {name} | {statistics.median(values):.2f} | {p90:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
