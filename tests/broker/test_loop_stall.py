"""The event loop is not blocked by 32 MiB compressed batches for a compacted topic (issue 20).

A real broker; one connection streams ~31 MiB zstd batches (random values, every record keyed)
to a compacted topic, one request in flight, while another connection times one-record
produces. Before the key check and big appends moved to worker threads, each big batch held the
loop for its decompression, its key scan (32,000 records) and the copies of its frame: the probe
got about 200 answers in 5 s and a p99 of 300-450 ms on this machine. The bounds here are
generous for a loaded CI machine (the 5 ms p99 of the issue is measured by
``scripts/bench/loop_stall.py`` on a quiet one) and still fail when the loop blocks for each
batch.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

from tests.support.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]


def _loop_stall() -> ModuleType:
    path = ROOT / "scripts" / "bench" / "loop_stall.py"
    spec = importlib.util.spec_from_file_location("tidelog_bench_loop_stall", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_one_record_produce_is_answered_while_big_compacted_batches_arrive(
    tmp_path: Path,
) -> None:
    bench = _loop_stall()
    result = bench.measure(5.0, "zstd", tmp_path, alone_seconds=1.0)
    loaded = result["under_stream"]
    # the stream really ran while the probe measured: several 31 MiB batches were appended
    assert result["batch_bytes"] > 30 * 1024 * 1024
    assert result["big_batches_acked"] >= 3, result
    # not blocked per batch: the probe keeps its pace (1 ms apart: about 1,000-1,500 answers in
    # 5 s here under load 6-10; blocked for each batch: about 200) and its tail stays bounded
    # (p99 10-45 ms under load 6-10; blocked: 300-450 ms)
    assert loaded["count"] >= 500, result
    assert loaded["p50_ms"] < 5.0, result
    assert loaded["p99_ms"] < 100.0, result


def test_first_read_of_old_segments_after_a_restart_is_served_whole(broker: BrokerProcess) -> None:
    """After a restart nothing below the recovery point was CRC-checked: the first fetches of
    those bytes (more than the loop's 256 KiB budget) are checked and read in a worker thread,
    and serve every record in order."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    values = [b"%06d" % i + bytes(1000) for i in range(3000)]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    for value in values:
        producer.send("old-bytes", value, partition=0)
    producer.flush()
    producer.close()
    broker.restart()
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        enable_auto_commit=False,
        fetch_max_bytes=4 * 1024 * 1024,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    try:
        tp = TopicPartition("old-bytes", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < len(values) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
    finally:
        consumer.close()
    assert got == values


def test_big_frames_pipelined_with_small_ones_keep_their_order(broker: BrokerProcess) -> None:
    """Frames of 1 MiB or more are gathered in a buffer of their own (no copy on the loop) and
    big batches appended in a worker: pipelined with small frames in one write, on a compacted
    topic (key checks in the worker) and a plain one, every answer comes back in order with
    the offsets the order of the frames gives."""
    from kafka.admin import KafkaAdminClient, NewTopic

    bench = _loop_stall()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics(
        [
            NewTopic("big-compacted", 1, 1, topic_configs={"cleanup.policy": "compact"}),
            NewTopic("big-plain", 1, 1, topic_configs={"max.message.bytes": "8388608"}),
        ]
    )
    admin.close()
    big_keyed = bench.build_batch(900_000, "lz4")  # compressed: its key check is in a worker
    small_keyed = bench.build_batch(200, "none", value_size=50)
    big_plain = bench.build_batch(5 * 1024 * 1024, "none")  # >= 4 MiB: appended in a worker
    frames = [
        ("big-compacted", big_keyed),
        ("big-compacted", small_keyed),
        ("big-plain", big_plain),
        ("big-compacted", small_keyed),
        ("big-plain", small_keyed),
    ]
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    sock = bench.connect(port)
    try:
        payload = b"".join(
            bench.produce_frame(topic, records, cid) for cid, (topic, records) in enumerate(frames)
        )
        sock.sendall(payload)
        answers = []
        for _ in frames:
            size = int.from_bytes(bench._read_exact(sock, 4), "big")
            answers.append(bench._read_exact(sock, size))
    finally:
        sock.close()
    offsets: dict[str, int] = {}
    for cid, (answer, (topic, records)) in enumerate(zip(answers, frames, strict=True)):
        assert int.from_bytes(answer[:4], "big") == cid  # in request order
        name_len = int.from_bytes(answer[8:10], "big")
        pos = 10 + name_len + 8
        error = int.from_bytes(answer[pos : pos + 2], "big", signed=True)
        base = int.from_bytes(answer[pos + 2 : pos + 10], "big", signed=True)
        assert error == 0, (cid, error)
        assert base == offsets.get(topic, 0), (cid, base)
        count = int.from_bytes(records[57:61], "big")  # records_count of the batch
        offsets[topic] = base + count
