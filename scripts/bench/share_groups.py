"""Share-group figures: share-consume throughput next to a classic consumer, and redelivery
latency after an acquisition lock timeout.

    .venv/bin/python scripts/bench/share_groups.py [--records 20000] [--size 100]
        [--consumers 2,4] [--samples 5] [--json]

One broker (``tidelog serve``, 127.0.0.1), one topic of one partition holding ``--records``
records of ``--size`` bytes (confluent-kafka producer). Then:

- ``share-N``: N confluent-kafka ``ShareConsumer`` processes (explicit acknowledgement, every
  record ACCEPTed; acknowledgements ride on the next ShareFetch) in one share group read the
  partition until every record was delivered; records/s over the wall time from the first
  poll to the last record, and how the records split between the members;
- ``classic``: one confluent-kafka ``Consumer`` of a classic group reads the same records (one
  partition: one classic member can read it), timed from its partition assignment (librdkafka
  prefetches, so timing from the first record would flatter it);
- ``redelivery``: a member acquires one record and never acknowledges it; another member of
  the group (lock duration 1000 ms) polls; the figure is the time from the acquisition to the
  redelivery minus the lock duration (``--samples`` times).

The machine is shared (see RESULTS.md): the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_broker import start_broker  # noqa: E402

LOCK_MS = 1000


def log(msg: str) -> None:
    print(f"bench share: {msg}", file=sys.stderr, flush=True)


def group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)


def fill(bootstrap: str, topic: str, n: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 1000})
    value = b"x" * size
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(60)


def _share_worker(bootstrap: str, group: str, topic: str, total: int, seen: Any, mine: Any,
                  start: Any, done: Any) -> None:  # fmt: skip
    from confluent_kafka import ShareConsumer

    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit", "log_level": 3})  # fmt: skip
    c.subscribe([topic])
    try:
        while seen.value < total:
            batch = c.poll(0.5)
            got = 0
            for m in batch:
                if m.error() is None:
                    c.acknowledge(m)
                    got += 1
            if got:
                with seen.get_lock():
                    if start.value == 0.0:
                        start.value = time.time()
                    seen.value += got
                    if seen.value >= total:
                        done.value = time.time()
                mine.value += got
        c.commit_sync(30)
    finally:
        c.close()


def share_rate(bootstrap: str, topic: str, total: int, consumers: int) -> dict[str, Any]:
    group = f"bench-share-{consumers}-{os.getpid()}-{time.time_ns()}"
    group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    ctx = mp.get_context("spawn")
    seen, start, done = ctx.Value("q", 0), ctx.Value("d", 0.0), ctx.Value("d", 0.0)
    counts = [ctx.Value("q", 0) for _ in range(consumers)]
    procs = [ctx.Process(target=_share_worker,
                         args=(bootstrap, group, topic, total, seen, counts[i], start, done))
             for i in range(consumers)]  # fmt: skip
    for p in procs:
        p.start()
    for p in procs:
        p.join(600)
    seconds = done.value - start.value
    return {"workload": f"share-{consumers}", "records": seen.value,
            "records_per_s": round(total / seconds) if seconds > 0 else None,
            "per_member": [c.value for c in counts]}  # fmt: skip


def classic_rate(bootstrap: str, topic: str, total: int) -> dict[str, Any]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-classic-{time.time_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": True})  # fmt: skip
    assigned: list[float] = []
    c.subscribe([topic], on_assign=lambda _c, _parts: assigned.append(time.time()))
    got = 0
    deadline = time.monotonic() + 600
    while got < total and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(1000, 0.5) if m.error() is None)
    start = assigned[0]
    seconds = time.time() - start
    c.close()
    return {"workload": "classic", "records": got, "records_per_s": round(got / seconds)}


def redelivery(bootstrap: str, topic: str, samples: int) -> dict[str, Any]:
    from confluent_kafka import Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    group = f"bench-redeliver-{time.time_ns()}"
    group_configs(
        bootstrap,
        group,
        {"share.record.lock.duration.ms": str(LOCK_MS), "share.auto.offset.reset": "earliest"},
    )
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
            "share.acknowledgement.mode": "explicit"}  # fmt: skip
    holder, taker = ShareConsumer(conf), ShareConsumer(conf)
    holder.subscribe([topic])
    taker.subscribe([topic])
    for c in (holder, taker):
        c.poll(1.0)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    late_ms: list[float] = []
    for i in range(samples):
        producer.produce(topic, value=f"redeliver-{i}".encode(), partition=0)
        producer.flush(10)
        acquired_at, first, held = None, holder, None
        deadline = time.monotonic() + 30
        while acquired_at is None and time.monotonic() < deadline:
            for c in (holder, taker):
                for m in c.poll(0.1):
                    if m.error() is None and m.value() == f"redeliver-{i}".encode():
                        acquired_at, first, held = time.monotonic(), c, m
        assert acquired_at is not None and held is not None, "never delivered"
        other = taker if first is holder else holder
        while time.monotonic() < deadline:
            msgs = [m for m in other.poll(0.05) if m.error() is None]
            if msgs:
                late_ms.append((time.monotonic() - acquired_at) * 1000 - LOCK_MS)
                for m in msgs:
                    other.acknowledge(m)
                other.commit_sync(10)
                break
        # the first member's lock ran out: its late acknowledgement is refused by the broker
        first.acknowledge(held)
        first.commit_sync(10)
    for c in (holder, taker):
        c.close()
    return {"workload": "redelivery", "lock_ms": LOCK_MS, "samples": len(late_ms),
            "after_lock_ms_median": round(statistics.median(late_ms), 1),
            "after_lock_ms_max": round(max(late_ms), 1)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--consumers", default="2,4")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tidelog-bench-share-") as tmp:
        proc, bootstrap = start_broker(
            Path(tmp) / "data", [f"group.share.min.record.lock.duration.ms={LOCK_MS}"]
        )
        try:
            log(f"filling {args.records} records of {args.size} B")
            fill(bootstrap, "bench-share", args.records, args.size)
            results = [classic_rate(bootstrap, "bench-share", args.records)]
            log(json.dumps(results[-1]))
            for n in (int(x) for x in args.consumers.split(",")):
                results.append(share_rate(bootstrap, "bench-share", args.records, n))
                log(json.dumps(results[-1]))
            results.append(redelivery(bootstrap, "bench-redeliver", args.samples))
        finally:
            proc.terminate()
            proc.wait(60)
    load = os.getloadavg()[0]
    for r in results:
        r["loadavg_1m"] = round(load, 1)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for r in results:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
