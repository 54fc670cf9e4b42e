"""Server-side assignors of consumer groups (KIP-848): ``uniform`` and ``range``.

An assignor maps each member to the partitions of the topics it subscribes to, from the
members' subscriptions, the topics' partition counts and the current target (for stickiness):

* ``uniform`` (Kafka's UniformAssignor, the default): every partition of every subscribed
  topic goes to one subscriber; counts differ by at most one between members with the same
  subscription. Sticky: a member keeps the partitions it has while it stays within its quota;
  the rest go, in (topic, partition) order, to the eligible member holding the fewest.
* ``range`` (Kafka's RangeAssignor): per topic, its subscribers sorted by member id get
  contiguous ranges, the first ``partitions % members`` one partition more.

Kafka divergence: the uniform assignor balances heterogeneous subscriptions greedily (fewest
partitions first) rather than with Kafka's iterative balancing; homogeneous groups, the common
case, get the same counts as Kafka's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["ASSIGNORS", "AssignmentSpec", "assign"]

TopicPartitions = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """What an assignor sees."""

    #: member id -> subscribed topic ids
    subscriptions: Mapping[str, frozenset[uuid.UUID]]
    #: topic id -> (name, partition count)
    topics: Mapping[uuid.UUID, tuple[str, int]]
    #: member id -> its current target (stickiness)
    current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]]


def _uniform(spec: AssignmentSpec) -> dict[str, TopicPartitions]:
    members = sorted(spec.subscriptions)
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
    all_partitions = sorted(
        ((tid, p) for tid, (name, n) in spec.topics.items() for p in range(n)),
        key=lambda tp: (spec.topics[tp[0]][0], tp[1]),
    )
    eligible: dict[tuple[uuid.UUID, int], list[str]] = {
        tp: [m for m in members if tp[0] in spec.subscriptions[m]] for tp in all_partitions
    }
    # Quota per member: an even share of the partitions it can get, shared with the members
    # that can get the same ones (exact for homogeneous subscriptions).
    quota: dict[str, int] = {}
    for m in members:
        mine = [tp for tp in all_partitions if m in eligible[tp]]
        if not mine:
            quota[m] = 0
            continue
        sharers = {x for tp in mine for x in eligible[tp]}
        quota[m] = -(-len(mine) // len(sharers))  # ceiling
    floor_quota = {
        m: len([tp for tp in all_partitions if m in eligible[tp]])
        // max(len({x for tp in all_partitions if m in eligible[tp] for x in eligible[tp]}), 1)
        for m in members
    }
    extra_left = sum(1 for tp in all_partitions if eligible[tp]) - sum(floor_quota.values())
    taken: set[tuple[uuid.UUID, int]] = set()
    # Sticky phase: keep current partitions up to the floor quota, then one more while the
    # remainder lasts.
    for m in members:
        current = sorted(
            (
                (tid, p)
                for tid, parts in spec.current.get(m, {}).items()
                for p in parts
                if (tid, p) in eligible and m in eligible[(tid, p)]
            ),
            key=lambda tp: (spec.topics[tp[0]][0], tp[1]),
        )
        for tp in current:
            if tp in taken:
                continue
            if len(owned[m]) < floor_quota[m]:
                owned[m].add(tp)
                taken.add(tp)
            elif len(owned[m]) < quota[m] and extra_left > 0:
                owned[m].add(tp)
                taken.add(tp)
                extra_left -= 1
    for tp in all_partitions:
        if tp in taken or not eligible[tp]:
            continue
        m = min(eligible[tp], key=lambda x: (len(owned[x]), x))
        owned[m].add(tp)
        taken.add(tp)
    return {m: _group(owned[m]) for m in members}


def _range(spec: AssignmentSpec) -> dict[str, TopicPartitions]:
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in spec.subscriptions}
    for tid, (_name, count) in spec.topics.items():
        subscribers = sorted(m for m, topics in spec.subscriptions.items() if tid in topics)
        if not subscribers:
            continue
        each, extra = divmod(count, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = each + (1 if i < extra else 0)
            if n:
                out[m][tid] = set(range(start, start + n))
            start += n
    return {m: {t: frozenset(p) for t, p in parts.items()} for m, parts in out.items()}


def _group(partitions: set[tuple[uuid.UUID, int]]) -> TopicPartitions:
    out: dict[uuid.UUID, set[int]] = {}
    for tid, p in partitions:
        out.setdefault(tid, set()).add(p)
    return {t: frozenset(p) for t, p in out.items()}


ASSIGNORS = {"uniform": _uniform, "range": _range}


def assign(name: str, spec: AssignmentSpec) -> dict[str, TopicPartitions]:
    """The target assignment by assignor ``name`` (``uniform`` or ``range``)."""
    return ASSIGNORS[name](spec)


def names(configured: object) -> Sequence[str]:
    """``group.consumer.assignors`` as a list of known assignor names (``uniform`` first)."""
    if isinstance(configured, str):
        items = [x.strip() for x in configured.split(",")]
    elif isinstance(configured, list | tuple):
        items = [str(x).strip() for x in configured]
    else:
        items = []
    known = [x for x in items if x in ASSIGNORS]
    return known or ["uniform", "range"]
