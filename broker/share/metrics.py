"""Prometheus families of the share groups (``Metrics.extra_families``, read at scrape time).

Per share group: records acquired, acknowledged by type (accept, release, reject), redelivered
(acquired again after a release or lock timeout) and archived (rejected, past the delivery
count limit, gaps, control or aborted records); and the acquisition locks held now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = ("share_families",)


def share_families(totals: Callable[[], dict[str, Any]]) -> Callable[[], Iterator[Any]]:
    def families() -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        by_group = totals()
        acquired = CounterMetricFamily(
            "tidelog_share_records_acquired", "Records acquired by share-group members.",
            labels=["group"],
        )  # fmt: skip
        acknowledged = CounterMetricFamily(
            "tidelog_share_records_acknowledged",
            "Records acknowledged by share-group members, by acknowledge type.",
            labels=["group", "type"],
        )
        redelivered = CounterMetricFamily(
            "tidelog_share_records_redelivered",
            "Records delivered again after a release or an acquisition lock timeout.",
            labels=["group"],
        )
        archived = CounterMetricFamily(
            "tidelog_share_records_archived",
            "Records archived (rejected, delivery count limit, gaps, control records).",
            labels=["group"],
        )
        locks = GaugeMetricFamily(
            "tidelog_share_in_flight_locks",
            "Acquisition locks held now (records acquired and not yet acknowledged).",
            labels=["group"],
        )
        for group, t in sorted(by_group.items()):
            acquired.add_metric([group], t["acquired"])
            for kind in ("accept", "release", "reject"):
                acknowledged.add_metric([group, kind], t[kind])
            redelivered.add_metric([group], t["redelivered"])
            archived.add_metric([group], t["archived"])
            locks.add_metric([group], t["in_flight_locks"])
        yield from (acquired, acknowledged, redelivered, archived, locks)

    return families
