"""Exactly-once mechanics of the sink without Spark: tasks write in transactions left open,
the driver commits or aborts them, a replayed micro-batch is skipped, a retried task fences its
older attempt. Runs against the test broker when it has transactions; skipped (with the reason)
otherwise. (Checked by hand against Tansu 0.6, a Kafka-protocol broker with transactions.)"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from tests.analytics.orders import require_transactions
from tidelog.analytics.options import parse_sink_options
from tidelog.analytics.sink import WritePlan, probe, write_task
from tidelog.analytics.transactions import end_transactions


def _batch(lo: int, hi: int) -> pa.RecordBatch:
    keys = pa.array([b"k%d" % i for i in range(lo, hi)], pa.binary())
    values = pa.array([b"v%d" % i for i in range(lo, hi)], pa.binary())
    return pa.RecordBatch.from_arrays([keys, values], names=["key", "value"])


def _values(bootstrap: str, topic: str, isolation: str) -> Counter[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                      enable_auto_commit=False, consumer_timeout_ms=3000)  # fmt: skip
    c.assign([TopicPartition(topic, p) for p in range(3)])
    c.seek_to_beginning()
    got = Counter(r.value for r in c)
    c.close()
    return got


def test_open_commit_abort_replay_and_fencing(module_broker: Any) -> None:
    boot = module_broker.bootstrap
    require_transactions(boot)
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=boot)
    admin.create_topics([NewTopic("eos", 3, 1)])
    admin.close()
    opts = parse_sink_options({"kafka.bootstrap.servers": boot, "topic": "eos",
                               "exactlyOnce": "true"})  # fmt: skip
    probe(opts)
    plan = WritePlan("eos", ("key", "value"))
    cfg = opts.producer_kwargs()

    def task(part: int, batch_id: int, lo: int, hi: int) -> Any:
        return write_task(opts, plan, iter([_batch(lo, hi)]), prefix="q", batch_id=batch_id,
                          query_id="q", partition_id=part)  # fmt: skip

    first = [task(0, 0, 0, 50), task(1, 0, 50, 100)]
    assert [m.records for m in first] == [50, 50]
    assert _values(boot, "eos", "read_committed") == Counter()  # open: not visible yet
    end_transactions(cfg, [m.txn for m in first], commit=True)
    want = Counter(b"v%d" % i for i in range(100))
    assert _values(boot, "eos", "read_committed") == want
    replay = [task(0, 0, 0, 50), task(1, 0, 50, 100)]  # micro-batch 0 again
    assert all(m.skipped and m.records == 0 and m.txn is None for m in replay)
    aborted = task(0, 1, 100, 110)
    end_transactions(cfg, [aborted.txn], commit=False)
    stale = task(1, 1, 200, 210)  # left open by an attempt that died ...
    retry = task(1, 1, 200, 210)  # ... the retry fences it and aborts what it left
    assert retry.txn.producer_epoch > stale.txn.producer_epoch
    end_transactions(cfg, [retry.txn], commit=True)
    want.update(b"v%d" % i for i in range(200, 210))
    assert _values(boot, "eos", "read_committed") == want  # each record once
