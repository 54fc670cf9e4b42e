"""The metric names the documentation gives are the names the endpoint serves, and the other way
round (issue 26: the README said ``tidelog_authentication_failures`` where the endpoint served
``tidelog_authentication_failures_total``); kafka_exporter's cluster, topic and group gauges are
served with its names and labels."""

from __future__ import annotations

import re
from pathlib import Path

from tidelog.broker.client_quota_manager import ClientQuotaManagers
from tidelog.broker.loop_lag import LoopLag
from tidelog.broker.metrics import Metrics, PartitionStats

ROOT = Path(__file__).resolve().parents[2]
# Kafka's quota MBeans keep their type's capital (``kafka_server_Produce_throttle_time``).
_TOKEN = re.compile(r"`((?:tidelog|kafka|process|python)_[A-Za-z0-9_]+|_[a-z0-9_]+)`")
_FAMILY_PREFIXES = ("tidelog_", "kafka_", "process_", "python_")


def _every_source() -> Metrics:
    """Metrics with every source a broker gives it (so every family is in the scrape)."""
    stats = [
        PartitionStats("orders", 0, 0, 10, 10, 4096, 1),
        PartitionStats("orders", 1, 2, 7, 6, 2048, 1),
        PartitionStats("__consumer_offsets", 0, 0, 3, 3, 300, 1),
    ]
    metrics = Metrics(
        partitions=lambda: stats,
        group_count=lambda: 1,
        group_offsets=lambda: [("audit", "orders", 0, 4), ("audit", "orders", 1, 5)],
    )
    metrics.observe_request("Fetch", 0.01, error=3, waited=0.2)
    metrics.topic_in("orders", 3, 300)
    metrics.security_counts = lambda: (2, 1)
    metrics.extra_families.append(LoopLag().families)
    quotas = ClientQuotaManagers(11, 1, lambda: 1000)
    quotas.update({(("client-id", "app"),): {"producer_byte_rate": 10.0}})
    quotas.produce.throttled("", "app", quotas.produce.record("", "app", 500))
    quotas.fetch.record("", "app", 1)
    quotas.request.record("", "app", 1)
    metrics.extra_families.append(quotas.families)
    return metrics


def _served(text: str) -> dict[str, str]:
    """Family name as exposed (``..._total`` for counters) -> type."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def _documented() -> set[str]:
    """Metric names in backticks on the lines of README.md and docs/*.md that speak of metrics
    (``tidelog_partition_log_end_offset``, ``_high_watermark``: a suffix of the row's first)."""
    names: set[str] = set()
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        if not page.exists():
            continue
        for line in page.read_text(encoding="utf-8").splitlines():
            is_row = line.startswith("| `")
            if not (is_row or "metric" in line.lower()):
                continue
            tokens = _TOKEN.findall(line.split("|")[1] if is_row else line)
            full = [t for t in tokens if not t.startswith("_")]
            prefix = "_".join(full[0].split("_")[:2]) if full else ""
            names.update(t if not t.startswith("_") else prefix + t for t in tokens)
    return names


def test_documented_metric_names_are_the_served_ones() -> None:
    text = _every_source().render().decode()
    served = {name for name in _served(text) if name.startswith(_FAMILY_PREFIXES)}
    documented = {name for name in _documented() if name.startswith(_FAMILY_PREFIXES)}
    # tidelog_broker / tidelog_topic (the pytest plugin's fixtures) are no metrics.
    documented -= {"tidelog_broker", "tidelog_broker_factory", "tidelog_topic"}
    assert sorted(documented - served) == [], "documented but not served"
    assert sorted(served - documented) == [], "served but not documented"


def test_kafka_exporter_cluster_topic_and_group_gauges() -> None:
    text = _every_source().render().decode()
    assert _served(text)["kafka_brokers"] == "gauge"
    assert re.search(r"^kafka_brokers 1\.0$", text, re.M)
    assert re.search(r'^kafka_topic_partitions\{topic="orders"\} 2\.0$', text, re.M)
    assert re.search(r'^kafka_topic_partitions\{topic="__consumer_offsets"\} 1\.0$', text, re.M)
    group = 'consumergroup="audit",topic="orders"'
    assert re.search(rf"^kafka_consumergroup_current_offset_sum\{{{group}\}} 9\.0$", text, re.M)
    # lag: (10 - 4) + (6 - 5)
    assert re.search(rf"^kafka_consumergroup_lag_sum\{{{group}\}} 7\.0$", text, re.M)
