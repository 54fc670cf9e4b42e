"""kafka_exporter's consumer-group families, computed at scrape time (``broker/metrics.py``).

Names, help texts and labels as danielqsj/kafka_exporter serves them, so its Grafana dashboards
work unchanged: ``kafka_consumergroup_current_offset`` and ``kafka_consumergroup_lag`` per
partition, and their ``..._sum`` per group and topic. Lag is the high watermark minus the
committed offset, never below 0; a partition whose high watermark is unknown has no lag line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import Metric

__all__ = ["group_families"]

_PER_PARTITION = ["consumergroup", "topic", "partition"]
_PER_TOPIC = ["consumergroup", "topic"]


def group_families(
    committed: Sequence[tuple[str, str, int, int]],
    high_watermarks: Mapping[tuple[str, int], int],
) -> Iterator[Metric]:
    """``committed``: (group, topic, partition, offset); ``high_watermarks``: by (topic,
    partition)."""
    from prometheus_client.core import GaugeMetricFamily

    offsets = GaugeMetricFamily(
        "kafka_consumergroup_current_offset",
        "Committed offset of a consumer group, per partition (as kafka_exporter).",
        labels=_PER_PARTITION,
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "High watermark minus the committed offset, per partition (as kafka_exporter).",
        labels=_PER_PARTITION,
    )
    offset_sum = GaugeMetricFamily(
        "kafka_consumergroup_current_offset_sum",
        "Current Offset of a ConsumerGroup at Topic for all partitions (as kafka_exporter).",
        labels=_PER_TOPIC,
    )
    lag_sum = GaugeMetricFamily(
        "kafka_consumergroup_lag_sum",
        "Current Approximate Lag of a ConsumerGroup at Topic for all partitions "
        "(as kafka_exporter).",
        labels=_PER_TOPIC,
    )
    totals: dict[tuple[str, str], list[int]] = {}
    for group, topic, partition, offset in sorted(committed):
        key = [group, topic, str(partition)]
        offsets.add_metric(key, offset)
        total = totals.setdefault((group, topic), [0, 0])
        total[0] += offset
        end = high_watermarks.get((topic, partition))
        if end is not None:
            behind = max(end - offset, 0)
            lag.add_metric(key, behind)
            total[1] += behind
    for (group, topic), (offset, behind) in totals.items():
        offset_sum.add_metric([group, topic], offset)
        lag_sum.add_metric([group, topic], behind)
    yield offsets
    yield lag
    yield offset_sum
    yield lag_sum
