"""Transactions benchmark: confluent-kafka, 1 KiB records, 100 records per transaction.

    .venv/bin/python scripts/bench/transactions.py [--records 100000] [--per-txn 100] [--runs 3]

Starts tidelog as users do (``tidelog serve``, default settings: an acknowledgement waits for
the fsync), then, on fresh one-partition topics, in turn:

- ``idempotent``: ``enable.idempotence=true`` (acks=all), produce every record, flush;
- ``transactional``: ``transactional.id`` set, and per 100 records ``begin_transaction``,
  ``produce`` x 100, ``commit_transaction`` (which flushes and waits for the markers).

Prints and writes (``--out``, JSON) records/s of both, transactions/s, and the overhead of
transactions against the idempotent rate (Kafka's guidance: a few percent at 100 ms commit
intervals; our aim: < 10% at 100 records per transaction). The median of ``--runs`` is kept.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import servers
import workloads as wl


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--per-txn", type=int, default=100)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tidelog-txn-bench-") as work:
        server = servers.Tidelog("tidelog", Path(work))
        server.start()
        try:
            idem: list[float] = []
            txn: list[tuple[float, float]] = []
            for run in range(args.runs):
                topic = f"idem-{run}"
                wl.create_topic(server.bootstrap, topic)
                idem.append(idempotent(server.bootstrap, topic, args.records, args.size))
                topic = f"txn-{run}"
                wl.create_topic(server.bootstrap, topic)
                txn.append(
                    transactional(server.bootstrap, topic, args.records, args.size, args.per_txn)
                )
                print(
                    f"run {run + 1}: idempotent {idem[-1]:,.0f} records/s, transactional "
                    f"{txn[-1][0]:,.0f} records/s ({txn[-1][1]:,.1f} transactions/s)",
                    flush=True,
                )
        finally:
            server.stop()
    idem_rate = statistics.median(idem)
    txn_rate = statistics.median(r for r, _ in txn)
    txn_per_s = statistics.median(t for _, t in txn)
    result: dict[str, Any] = {
        "records": args.records,
        "record_bytes": args.size,
        "records_per_transaction": args.per_txn,
        "runs": args.runs,
        "idempotent_records_per_s": round(idem_rate),
        "transactional_records_per_s": round(txn_rate),
        "transactions_per_s": round(txn_per_s, 1),
        "overhead_pct": round(100 * (1 - txn_rate / idem_rate), 1),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
