"""broker/metrics.py: the counters, the scrape text, and the endpoint of a real broker."""

from __future__ import annotations

import asyncio
import re
import socket
import time
import urllib.request
from typing import Any

import pytest

from tests.tools.tools_fixtures import RunTool
from tidelog.broker.metrics import LATENCY_BUCKETS, Metrics, PartitionStats, metrics_of


def _value(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    assert m, f"{name}{labels} not in:\n{text}"
    return float(m.group(1))


def test_counters_and_histogram() -> None:
    m = Metrics()
    m.observe_request("Produce", 0.0004)
    m.observe_request("Produce", 0.003, error=True)
    m.observe_request("Produce", 99.0)
    m.observe_request("Fetch", LATENCY_BUCKETS[0])  # a bound counts in its own bucket
    m.bytes_in(100)
    m.bytes_out(250)
    m.connection_opened()
    m.connection_opened()
    m.connection_closed()
    text = m.render().decode()
    assert _value(text, "tidelog_requests_total", '{api="Produce"}') == 3
    assert _value(text, "tidelog_request_errors_total", '{api="Produce",error="EXCEPTION"}') == 1
    bucket = "tidelog_request_latency_seconds_bucket"
    assert _value(text, bucket, '{api="Produce",le="0.0005"}') == 1
    assert _value(text, bucket, '{api="Produce",le="0.005"}') == 2
    assert _value(text, bucket, '{api="Produce",le="30.0"}') == 2
    assert _value(text, bucket, '{api="Produce",le="+Inf"}') == 3
    assert _value(text, bucket, '{api="Fetch",le="0.0005"}') == 1
    assert _value(text, "tidelog_request_latency_seconds_count", '{api="Produce"}') == 3
    assert _value(text, "tidelog_bytes_in_total") == 100
    assert _value(text, "tidelog_bytes_out_total") == 250
    assert _value(text, "tidelog_connections") == 1
    assert _value(text, "tidelog_connections_opened_total") == 2
    assert "tidelog_groups" not in text  # no coordinator: no gauge


def test_error_codes_waits_and_topics() -> None:
    m = Metrics()
    m.observe_request("JoinGroup", 0.001, error=79)  # MEMBER_ID_REQUIRED: a normal step
    m.observe_request("JoinGroup", 0.001, error=27)  # REBALANCE_IN_PROGRESS
    m.observe_request("Fetch", 0.5003, waited=0.5)
    m.topic_in("orders", 10, 1000)
    m.topic_in("orders", 5, 500)
    m.topic_out("orders", 700)
    text = m.render().decode()
    assert '{api="JoinGroup",error="MEMBER_ID_REQUIRED"}' not in text
    assert (
        _value(
            text, "tidelog_request_errors_total", '{api="JoinGroup",error="REBALANCE_IN_PROGRESS"}'
        )
        == 1
    )
    assert _value(text, "tidelog_requests_total", '{api="JoinGroup"}') == 2
    bucket = "tidelog_request_latency_seconds_bucket"
    assert _value(text, bucket, '{api="Fetch",le="5e-05"}') == 0
    assert _value(text, bucket, '{api="Fetch",le="0.0005"}') == 1  # the 500 ms wait left out
    assert _value(text, "tidelog_request_wait_seconds_bucket", '{api="Fetch",le="0.5"}') == 1
    assert LATENCY_BUCKETS[0] == 0.00005
    t = '{topic="orders"}'
    assert _value(text, "kafka_server_brokertopicmetrics_messagesin_total", t) == 15
    assert _value(text, "kafka_server_brokertopicmetrics_bytesin_total", t) == 1500
    assert _value(text, "kafka_server_brokertopicmetrics_bytesout_total", t) == 700
    assert _value(text, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert _value(text, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert _value(text, "process_resident_memory_bytes") > 0
    assert _value(text, "process_open_fds") > 0
    assert "process_cpu_seconds_total" in text


def test_internal_topics_folded_and_group_lag() -> None:
    stats = [PartitionStats("__consumer_offsets", p, 0, 2, 2, 100, 1) for p in range(50)]
    stats.append(PartitionStats("orders", 0, 0, 42, 40, 4096, 1))
    m = Metrics(partitions=lambda: stats, group_offsets=lambda: [("audit", "orders", 0, 30)])
    text = m.render().decode()
    folded = '{partition="all",topic="__consumer_offsets"}'
    assert _value(text, "tidelog_partition_size_bytes", folded) == 5000
    assert _value(text, "tidelog_partition_segments", folded) == 50
    assert 'partition="7",topic="__consumer_offsets"' not in text
    g = '{consumergroup="audit",partition="0",topic="orders"}'
    assert _value(text, "kafka_consumergroup_current_offset", g) == 30
    assert _value(text, "kafka_consumergroup_lag", g) == 10
    assert (
        _value(text, "kafka_topic_partition_current_offset", '{partition="0",topic="orders"}') == 40
    )
    assert _value(text, "kafka_server_replicamanager_partitioncount") == 51
    detailed = Metrics(partitions=lambda: stats, fold_internal=False).render().decode()
    assert 'partition="7",topic="__consumer_offsets"' in detailed


def test_partitions_and_groups_at_scrape_time() -> None:
    stats = [PartitionStats("orders", 1, 5, 42, 40, 4096, 2)]
    groups: dict[str, object] = {"a": 1}
    m = Metrics(partitions=lambda: stats, group_count=lambda: len(groups))
    text = m.render().decode()
    labels = '{partition="1",topic="orders"}'
    assert _value(text, "tidelog_partition_log_end_offset", labels) == 42
    assert _value(text, "tidelog_partition_high_watermark", labels) == 40
    assert _value(text, "tidelog_partition_log_start_offset", labels) == 5
    assert _value(text, "tidelog_partition_size_bytes", labels) == 4096
    assert _value(text, "tidelog_partition_segments", labels) == 2
    assert _value(text, "tidelog_groups") == 1
    groups["b"] = 2
    assert _value(m.render().decode(), "tidelog_groups") == 2


def test_failing_sources_do_not_break_a_scrape() -> None:
    def boom() -> list[PartitionStats]:
        raise RuntimeError("log closed")

    m = Metrics(partitions=boom, group_count=lambda: 1 // 0)
    text = m.render().decode()
    assert "tidelog_bytes_in_total" in text and "tidelog_partition" not in text


def test_metrics_of_falls_back() -> None:
    class NoMetrics:
        pass

    fallback = metrics_of(NoMetrics())
    assert isinstance(fallback, Metrics) and metrics_of(NoMetrics()) is fallback
    own = Metrics()

    class WithMetrics:
        metrics = own

    assert metrics_of(WithMetrics()) is own


def test_endpoint_start_stop_and_busy_port() -> None:
    async def scenario() -> None:
        m = Metrics(port=0, host="127.0.0.1")
        await m.start()
        assert m.port
        m.bytes_in(7)
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{m.port}/metrics").read()
        )
        assert b"tidelog_bytes_in_total 7.0" in body
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            busy = Metrics(port=s.getsockname()[1], host="127.0.0.1")
            with pytest.raises(OSError, match=r"choose a free metrics\.port"):
                await busy.start()
        await m.stop()

    asyncio.run(scenario())


@pytest.mark.integration
def test_broker_serves_metrics(tidelog: RunTool, broker_factory: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    broker = broker_factory({"metrics.port": str(port), "offsets.topic.num.partitions": "1"})
    assert f"metrics on http://127.0.0.1:{port}/metrics" in broker.log_text()
    b = ["--bootstrap-server", broker.bootstrap]
    assert tidelog("produce", *b, "--topic", "m-orders", stdin=b"a\nb\nc\n").code == 0
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert _value(text, "tidelog_requests_total", '{api="Produce"}') >= 1
    assert _value(text, "tidelog_requests_total", '{api="ApiVersions"}') >= 1
    assert _value(text, "tidelog_bytes_in_total") > 0
    assert _value(text, "tidelog_bytes_out_total") > 0
    assert _value(text, "tidelog_connections_opened_total") >= 1
    labels = '{partition="0",topic="m-orders"}'
    assert _value(text, "tidelog_partition_log_end_offset", labels) == 3
    assert _value(text, "tidelog_partition_high_watermark", labels) == 3
    assert _value(text, "tidelog_partition_size_bytes", labels) > 0
    assert "tidelog_groups" in text
    t = '{topic="m-orders"}'
    assert _value(text, "kafka_server_brokertopicmetrics_messagesin_total", t) == 3
    assert _value(text, "kafka_server_brokertopicmetrics_bytesin_total", t) > 0

    # A group consumes (long polls included), commits: its offsets and lag are scraped.
    c = tidelog("consume", *b, "--topic", "m-orders", "--group", "m-g", "--from-beginning",
                "--max-messages", "2", "--timeout-ms", "20000")  # fmt: skip
    assert c.code == 0, c.err
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    g = '{consumergroup="m-g",partition="0",topic="m-orders"}'
    assert _value(text, "kafka_consumergroup_current_offset", g) == 2
    assert _value(text, "kafka_consumergroup_lag", g) == 1
    assert _value(text, "kafka_server_brokertopicmetrics_bytesout_total", t) > 0
    assert 'error="MEMBER_ID_REQUIRED"' not in text

    # A fetch at the end of the log waits (long poll): that wait is its own metric.
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=200)
    try:
        consumer.assign([TopicPartition("m-orders", 0)])
        consumer.seek_to_end()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            assert not consumer.poll(timeout_ms=300)
    finally:
        consumer.close()
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    waits = _value(text, "tidelog_request_wait_seconds_count", '{api="Fetch"}')
    assert waits >= 1
    assert _value(text, "tidelog_request_wait_seconds_sum", '{api="Fetch"}') >= 0.15 * waits
    fetches = _value(text, "tidelog_request_latency_seconds_count", '{api="Fetch"}')
    # the parked time is not in the latency: every fetch answered within 100 ms of its data
    assert (
        _value(text, "tidelog_request_latency_seconds_bucket", '{api="Fetch",le="0.1"}') == fetches
    )
    assert 'error="MEMBER_ID_REQUIRED"' not in text
    assert _value(text, "process_resident_memory_bytes") > 0
