"""Transactions benchmark: 1 KiB records, 100 records per transaction, against the idempotent rate.

    .venv/bin/python scripts/bench/transactions.py [--records 100000] [--per-txn 100] [--runs 3]
        [--java] [--base DIR]

Starts tidelog as users do (``tidelog serve``, default settings: an acknowledgement waits for
the fsync), then, on fresh one-partition topics, in turn:

- ``idempotent``: confluent-kafka with ``enable.idempotence=true`` (acks=all), produce every
  record, flush;
- ``transactional``: confluent-kafka with ``transactional.id`` set, and per 100 records
  ``begin_transaction``, ``produce`` x 100, ``commit_transaction`` (which flushes and waits for
  the markers). librdkafka speaks transaction protocol version 1: AddPartitionsToTxn, Produce,
  EndTxn, three synchronous round trips per transaction;
- with ``--java`` (needs java, javac and ``scripts/jvm-deps``' ``clients`` set): the same two
  with Kafka's Java client 4.x (``java/TxnBench.java``, compiled with javac at start), whose
  transactions use version 2 (Produce v12 adds the partition, EndTxn v5: two round trips).

``--kafka`` adds Apache Kafka 4.4 (``servers.Kafka``: one node, page-cache acknowledgements,
its defaults) to the rotation: what the same clients reach when no acknowledgement waits for
an fsync, the ceiling the client itself sets.

``--base DIR`` runs a second broker from another checkout (``PYTHONPATH=DIR``, e.g. a ``git
archive`` of main) and interleaves it with this tree run by run: before/after in the same
minutes. Besides records/s, each transactional run reports the broker's CPU (user + system,
``/proc``) per transaction.

Prints and writes (``--out``, JSON) the medians of ``--runs``, and the goal of issue 33 per
client: "transactional >= 50% of idempotent: X/s >= Y/s: met/NOT met" (this tree).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.support.jvm

import servers
import workloads as wl

HERE = Path(__file__).resolve().parent


def idempotent(bootstrap: str, topic: str, records: int, size: int) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    producer.list_topics(topic, timeout=30)
    value = b"v" * size
    start = time.perf_counter()
    i = 0
    while i < records:
        try:
            producer.produce(topic, value, partition=0)
            i += 1
        except BufferError:
            producer.poll(0.0005)
    if producer.flush(120):
        raise RuntimeError("idempotent producer: messages left unacknowledged")
    return records / (time.perf_counter() - start)


def transactional(
    bootstrap: str, topic: str, records: int, size: int, per_txn: int
) -> tuple[float, float]:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{topic}",
            "linger.ms": 5,
        }
    )
    producer.list_topics(topic, timeout=30)
    producer.init_transactions(30)
    value = b"v" * size
    transactions = records // per_txn
    start = time.perf_counter()
    for _ in range(transactions):
        producer.begin_transaction()
        for _ in range(per_txn):
            while True:
                try:
                    producer.produce(topic, value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.0005)
        producer.commit_transaction(60)
    seconds = time.perf_counter() - start
    return transactions * per_txn / seconds, transactions / seconds


@dataclass
class Java:
    """``java/TxnBench.java`` compiled into a temporary directory."""

    java: str
    classpath: str

    @staticmethod
    def build(workdir: Path) -> Java:
        from tests.support.jvm import java_bin, jvm_cache

        java = java_bin()
        javac = shutil.which("javac")
        jars = sorted((jvm_cache() / "clients" / "lib").glob("*.jar"))
        if java is None or javac is None or not jars:
            raise SystemExit(
                "--java needs java, javac and the clients jars (scripts/jvm-deps): missing"
            )
        out = workdir / "java-classes"
        out.mkdir()
        classpath = os.pathsep.join(str(j) for j in jars)
        subprocess.run(
            [javac, "-d", str(out), "-cp", classpath, str(HERE / "java" / "TxnBench.java")],
            check=True,
        )
        return Java(java, f"{out}{os.pathsep}{classpath}")

    def run(
        self, bootstrap: str, topic: str, mode: str, records: int, size: int, per_txn: int
    ) -> tuple[float, float]:
        """``(records/s, transactions/s)`` of one TxnBench run (a warm-up of 20 transactions'
        worth of records goes first, untimed)."""
        argv = [self.java, "-Xmx256m", "-cp", self.classpath, "TxnBench", bootstrap, topic, mode]
        argv += [str(records), str(size), str(per_txn), str(WARMUP_TXNS * per_txn)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        found = re.search(r"records_per_s=(\d+) transactions_per_s=([\d.]+)", done.stdout)
        if done.returncode != 0 or found is None:
            raise RuntimeError(f"TxnBench {mode} failed: {done.stdout[-500:]}{done.stderr[-2000:]}")
        return float(found.group(1)), float(found.group(2))


#: Transactions (of ``--per-txn`` records) the Java client runs untimed first (JIT warm-up).
WARMUP_TXNS = 20


def _measure(
    server: servers.Server, transactions: int, fn: Callable[[], tuple[float, float]]
) -> tuple[float, float, float]:
    """``fn()``'s (records/s, transactions/s) and the broker's CPU ms per transaction."""
    cpu_before = server.cpu_seconds()
    rate, per_s = fn()
    cpu_ms = (server.cpu_seconds() - cpu_before) * 1000 / max(1, transactions)
    return rate, per_s, cpu_ms


def _goal(client: str, txn_rate: float, idem_rate: float) -> str:
    target = idem_rate / 2
    verdict = "met" if txn_rate >= target else "NOT met"
    return (
        f"{client}: transactional >= 50% of idempotent: {txn_rate:,.0f}/s >= {target:,.0f}/s: "
        f"{verdict}"
    )


def _workloads(
    bootstrap: str, run: int, args: argparse.Namespace, java: Java | None
) -> dict[str, Callable[[], tuple[float, float]]]:
    """The runs of one round on one broker, each on a fresh topic."""

    def topic(kind: str) -> str:
        wl.create_topic(bootstrap, f"{kind}-{run}")
        return f"{kind}-{run}"

    idem_topic = topic("idem")
    out: dict[str, Callable[[], tuple[float, float]]] = {
        "idempotent": lambda: (idempotent(bootstrap, idem_topic, args.records, args.size), 0.0),
        "transactional": functools.partial(
            transactional, bootstrap, topic("txn"), args.records, args.size, args.per_txn
        ),
    }
    if java is not None:
        for mode, kind in (("idempotent", "jidem"), ("transactional", "jtxn")):
            out[f"java {mode}"] = functools.partial(
                java.run, bootstrap, topic(kind), mode, args.records, args.size, args.per_txn
            )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--per-txn", type=int, default=100)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--java", action="store_true", help="add Kafka's Java client (version 2)")
    p.add_argument("--base", type=Path, help="also run the broker of this checkout (A/B)")
    p.add_argument("--kafka", action="store_true", help="also run Apache Kafka 4.4 (a ceiling)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    transactions = args.records // args.per_txn
    trees: dict[str, Path | None] = {"this tree": None}
    if args.base is not None:
        trees["base"] = args.base.resolve()
    # (tree, workload) -> [(records/s, transactions/s, broker CPU ms per transaction)]
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="tidelog-txn-bench-") as work:
        java = Java.build(Path(work)) if args.java else None
        brokers: dict[str, servers.Server] = {}
        try:
            for name, tree in trees.items():
                server = servers.Tidelog("tidelog", Path(work) / name.replace(" ", "-"))
                server.tree = tree
                server.start()
                brokers[name] = server
            if args.kafka:
                kafka = servers.Kafka("kafka", Path(work) / "kafka")
                kafka.start(timeout=120)
                brokers["kafka"] = kafka
            for run in range(args.runs):
                for name, server in brokers.items():
                    workloads = _workloads(server.bootstrap, run, args, java)
                    line = []
                    for workload, fn in workloads.items():
                        txns = transactions + (WARMUP_TXNS if workload.startswith("java") else 0)
                        got = _measure(server, txns, fn)
                        results.setdefault((name, workload), []).append(got)
                        cpu = "" if "idempotent" in workload else f", {got[2]:.2f} ms CPU/txn"
                        line.append(f"{workload} {got[0]:,.0f}/s{cpu}")
                    print(f"run {run + 1} {name}: " + "; ".join(line), flush=True)
        finally:
            for server in brokers.values():
                server.stop()
    summary: dict[str, Any] = {
        "records": args.records,
        "record_bytes": args.size,
        "records_per_transaction": args.per_txn,
        "runs": args.runs,
    }
    for (name, workload), runs in results.items():
        key = f"{name} {workload}".replace(" ", "_")
        summary[f"{key}_records_per_s"] = round(statistics.median(r for r, _, _ in runs))
        if "idempotent" not in workload:
            summary[f"{key}_transactions_per_s"] = round(
                statistics.median(t for _, t, _ in runs), 1
            )
            summary[f"{key}_broker_cpu_ms_per_txn"] = round(
                statistics.median(c for _, _, c in runs), 2
            )
    print(json.dumps(summary, indent=2))
    for client, prefix in (("confluent-kafka (v1)", ""), ("java (v2)", "java ")):
        idem = results.get(("this tree", f"{prefix}idempotent"))
        txn = results.get(("this tree", f"{prefix}transactional"))
        if idem and txn:
            print(
                _goal(
                    client,
                    statistics.median(r for r, _, _ in txn),
                    statistics.median(r for r, _, _ in idem),
                )
            )
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
