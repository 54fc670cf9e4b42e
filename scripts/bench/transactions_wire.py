"""Transactions at the wire: what one transaction costs with protocol v1 and v2 (KIP-890).

    .venv/bin/python scripts/bench/transactions_wire.py [--transactions 300] [--runs 3] [--tree DIR]

One hand-built blocking client (``tests/kafka_wire.py``), the same for every mode, against
``tidelog serve`` (default settings), 100 records of 1 KiB per transaction, one partition:

- ``idempotent``: one synchronous Produce v9 of 100 idempotent records (the cost of one round
  trip with an fsync, no transaction);
- ``v1``: AddPartitionsToTxn v3, Produce v9, EndTxn v3 (what librdkafka, kafka-python and
  aiokafka send);
- ``v2``: Produce v12 (the partition is added by the broker), EndTxn v5 (the epoch bump); what
  Kafka 4's Java client sends once ``transaction.version`` 2 is finalized.

The three run interleaved, one transaction of each in turn, so a change of the machine's load
hits them alike. Only the time between sending a request and reading its answer counts (the
batches are built before). Prints ms per transaction (median of ``--runs``) and the round trips
per transaction.

``--profile N`` then runs N more transactions of each mode alone, twice: once for the broker's
CPU per transaction (utime + stime of its process), once under ``strace -c -f`` for the system
calls per transaction (``fsync``: the flushes; ``futex``: thread hand-offs; ``epoll_pwait``:
loop iterations; ``write``: answers and the flush threads' wake-ups of the loop).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.support.kafka_wire

import servers
import workloads as wl
from latency import syscall_counts

from tests.support.kafka_wire import WireClient
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.schema import request_types
from tidelog.storage.record_codec import encode_batch
from tidelog.storage.record_types import NewRecord

PER_TXN = 100
VALUE = b"v" * 1024


def _batch(pid: int, epoch: int, seq: int, transactional: bool) -> bytes:
    return encode_batch(
        [NewRecord(value=VALUE) for _ in range(PER_TXN)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )


def _produce(version: int, txn_id: str | None, topic: str, batch: bytes) -> Any:
    t = request_types(0, version)
    return t.ProduceRequest(
        transactional_id=txn_id,
        acks=-1,
        timeout=timedelta(seconds=30),
        topic_data=(
            t.TopicProduceData(
                name=topic, partition_data=(t.PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )


class Timed:
    """A WireClient whose round trips are timed."""

    def __init__(self, bootstrap: str) -> None:
        self.client = WireClient(bootstrap, timeout=60)
        self.seconds = 0.0
        self.requests = 0

    def request(self, request: Any) -> Any:
        start = time.perf_counter()
        answer = self.client.request(request)
        self.seconds += time.perf_counter() - start
        self.requests += 1
        return answer


def _check(code: Any, what: str) -> None:
    if code != ErrorCode.none:
        raise RuntimeError(f"{what}: {code!r}")


def _init(c: Timed, txn_id: str | None, version: int) -> tuple[int, int]:
    t = request_types(22, version)
    answer = c.request(
        t.InitProducerIdRequest(
            transactional_id=txn_id,
            transaction_timeout=timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )
    )
    _check(answer.error_code, "InitProducerId")
    c.seconds, c.requests = 0.0, 0
    return int(answer.producer_id), int(answer.producer_epoch)


class Idempotent:
    """One synchronous Produce v9 of 100 idempotent records per step."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.c, self.topic, self.steps = Timed(bootstrap), topic, 0
        self.pid, self.epoch = _init(self.c, None, 4)

    def step(self) -> None:
        batch = _batch(self.pid, self.epoch, self.steps * PER_TXN, False)
        answer = self.c.request(_produce(9, None, self.topic, batch))
        _check(answer.responses[0].partition_responses[0].error_code, "Produce")
        self.steps += 1


class V1(Idempotent):
    """AddPartitionsToTxn v3, Produce v9, EndTxn v3 per step (one transaction)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.c, self.topic, self.steps = Timed(bootstrap), topic, 0
        self.txn_id = f"wire-v1-{topic}"
        self.pid, self.epoch = _init(self.c, self.txn_id, 4)

    def step(self) -> None:
        add, end = request_types(24, 3), request_types(26, 3)
        batch = _batch(self.pid, self.epoch, self.steps * PER_TXN, True)
        answer = self.c.request(
            add.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.txn_id,
                v3_and_below_producer_id=self.pid,
                v3_and_below_producer_epoch=self.epoch,
                v3_and_below_topics=(
                    add.AddPartitionsToTxnTopic(name=self.topic, partitions=(0,)),
                ),
            )
        )
        code = answer.results_by_topic_v3_and_below[0].results_by_partition[0]
        _check(code.partition_error_code, "AddPartitionsToTxn")
        answer = self.c.request(_produce(9, self.txn_id, self.topic, batch))
        _check(answer.responses[0].partition_responses[0].error_code, "Produce")
        answer = self.c.request(
            end.EndTxnRequest(
                transactional_id=self.txn_id,
                producer_id=self.pid,
                producer_epoch=self.epoch,
                committed=True,
            )
        )
        _check(answer.error_code, "EndTxn")
        self.steps += 1


class V2(Idempotent):
    """Produce v12 (implicit add), EndTxn v5 (epoch bump) per step (one transaction)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.c, self.topic, self.steps = Timed(bootstrap), topic, 0
        self.txn_id = f"wire-v2-{topic}"
        self.pid, self.epoch = _init(self.c, self.txn_id, 5)

    def step(self) -> None:
        end = request_types(26, 5)
        batch = _batch(self.pid, self.epoch, 0, True)  # every transaction has a new epoch
        answer = self.c.request(_produce(12, self.txn_id, self.topic, batch))
        _check(answer.responses[0].partition_responses[0].error_code, "Produce")
        answer = self.c.request(
            end.EndTxnRequest(
                transactional_id=self.txn_id,
                producer_id=self.pid,
                producer_epoch=self.epoch,
                committed=True,
            )
        )
        _check(answer.error_code, "EndTxn")
        self.pid, self.epoch = int(answer.producer_id), int(answer.producer_epoch)
        self.steps += 1


MODES: dict[str, type[Idempotent]] = {"idempotent": Idempotent, "v1": V1, "v2": V2}

#: The system calls ``--profile`` prints per transaction.
PROFILED = ("fsync", "futex", "epoll_pwait", "write", "read", "pwritev2", "getpid")


def profile(server: servers.Server, mode: str, steps: int) -> dict[str, float]:
    """Broker CPU (ms) and system calls per transaction of ``mode``, ``steps`` each."""
    topic = f"{mode}-profile"
    wl.create_topic(server.bootstrap, topic)
    runner = MODES[mode](server.bootstrap, topic)
    runner.step()  # the first one creates __transaction_state's partition state
    cpu = server.cpu_seconds()
    for _ in range(steps):
        runner.step()
    figures = {"cpu_ms": (server.cpu_seconds() - cpu) * 1000 / steps}
    calls = syscall_counts(server.pid, lambda: [runner.step() for _ in range(steps)])
    runner.c.client.close()
    figures["syscalls"] = sum(calls.values()) / steps
    figures.update({name: calls.get(name, 0) / steps for name in PROFILED})
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--transactions", type=int, default=300)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tree", type=Path, help="run the broker of another checkout (A/B)")
    p.add_argument("--profile", type=int, default=0, help="CPU and syscalls, N txns per mode")
    args = p.parse_args(argv)
    profiles: dict[str, dict[str, float]] = {}
    results: dict[str, list[float]] = {m: [] for m in MODES}
    requests: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tidelog-txn-wire-") as work:
        server = servers.Tidelog("tidelog", Path(work))
        server.tree = args.tree
        server.start()
        try:
            for run in range(args.runs):
                runners = {}
                for mode, cls in MODES.items():
                    topic = f"{mode}-{run}"
                    wl.create_topic(server.bootstrap, topic)
                    runners[mode] = cls(server.bootstrap, topic)
                # interleaved, one step of each mode in turn: the load drifts for all alike
                for _ in range(args.transactions):
                    for runner in runners.values():
                        runner.step()
                for mode, runner in runners.items():
                    runner.c.client.close()
                    results[mode].append(1000 * runner.c.seconds / args.transactions)
                    requests[mode] = runner.c.requests / args.transactions
                print(
                    f"run {run + 1}: " + ", ".join(f"{m} {results[m][-1]:.2f} ms" for m in MODES),
                    flush=True,
                )
            if args.profile:
                for mode in MODES:
                    profiles[mode] = profile(server, mode, args.profile)
        finally:
            server.stop()
    for mode in MODES:
        print(
            f"{mode}: {statistics.median(results[mode]):.2f} ms per 100 records "
            f"({requests[mode]:.0f} round trips)"
        )
    if profiles:
        names = ("cpu_ms", "syscalls", *PROFILED)
        print("\nper transaction | " + " | ".join(names))
        for mode, figures in profiles.items():
            print(f"{mode} | " + " | ".join(f"{figures[n]:.2f}" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
