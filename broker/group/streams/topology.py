"""A streams group's topology as the client declares it (StreamsGroupHeartbeat's Topology), and
what the coordinator makes of it against the topics that exist (Kafka's
InternalTopicManager.configureTopics in its streams.topics package): the number of tasks of each
subtopology, the partition counts of the repartition and changelog topics, the internal topics
to create and the status to report (MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS,
MISSING_INTERNAL_TOPICS).

Partition counts: a subtopology has as many tasks as its largest source topic (external or
repartition); a repartition topic without a declared count takes the task count of the
subtopologies that write to it, and a copartition group's repartition topics take the count of
its external source topics; a changelog topic has one partition per task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "ConfiguredTopology",
    "Status",
    "Subtopology",
    "TopicInfo",
    "Topology",
    "configure",
]


class Status:
    """StreamsGroupHeartbeatResponse's status codes."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic the client declares: its partitions (0: derived), replication factor
    (0: the broker's default) and configs."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    #: each group: indexes into source_topics, source_topic_regex, repartition_source_topics
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...] = ()

    def topic_names(self) -> frozenset[str]:
        """Every topic the topology reads or writes (its partition counts matter)."""
        out: set[str] = set()
        for s in self.subtopologies:
            out.update(s.source_topics)
            out.update(s.repartition_sink_topics)
            out.update(t.name for t in s.repartition_source_topics)
            out.update(t.name for t in s.state_changelog_topics)
        return frozenset(out)


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    """The outcome of ``configure``: tasks per subtopology (empty when the topology cannot run
    yet), the internal topics to create, and the status entries to report."""

    tasks: Mapping[str, int] = field(default_factory=dict)
    #: name -> (partitions, configs) of internal topics that do not exist yet
    missing_internal: Mapping[str, tuple[int, Mapping[str, str]]] = field(default_factory=dict)
    status: tuple[tuple[int, str], ...] = ()

    @property
    def ready(self) -> bool:
        return bool(self.tasks) and not self.status


def configure(topology: Topology, partitions: Mapping[str, int]) -> ConfiguredTopology:
    """``partitions``: name -> partition count of the topics that exist."""
    subs = topology.subtopologies
    repartition: dict[str, TopicInfo] = {}
    for s in subs:
        for t in s.repartition_source_topics:
            repartition[t.name] = t
    missing_sources = sorted(
        {t for s in subs for t in s.source_topics if t not in partitions and t not in repartition}
    )
    if missing_sources:
        return ConfiguredTopology(
            status=(
                (
                    Status.MISSING_SOURCE_TOPICS,
                    "Source topics " + ", ".join(missing_sources) + " are missing.",
                ),
            )
        )
    counts: dict[str, int] = {}
    for name, info in repartition.items():
        if info.partitions > 0:
            counts[name] = info.partitions
        elif name in partitions:
            counts[name] = partitions[name]
    incorrect: list[str] = []
    # Copartition groups: repartition topics without a count take the external topics' count.
    for s in subs:
        for src_idx, _regex_idx, rep_idx in s.copartition_groups:
            external = [s.source_topics[i] for i in src_idx if i < len(s.source_topics)]
            internal = [
                s.repartition_source_topics[i].name
                for i in rep_idx
                if i < len(s.repartition_source_topics)
            ]
            ext_counts = {partitions[t] for t in external if t in partitions}
            if len(ext_counts) > 1:
                incorrect.append(
                    "Following topics do not have the same number of partitions: "
                    + str(sorted(external))
                )
                continue
            if ext_counts:
                n = ext_counts.pop()
                for name in internal:
                    if name not in counts or repartition[name].partitions <= 0:
                        counts[name] = n
    # Repartition topics written by other subtopologies: their task count (to a fixpoint).
    for _ in range(len(subs) + 1):
        changed = False
        for name in repartition:
            if name in counts:
                continue
            writers = [s for s in subs if name in s.repartition_sink_topics]
            got = [_task_count(w, partitions, counts) for w in writers]
            if got and all(n > 0 for n in got):
                counts[name] = max(got)
                changed = True
        if not changed:
            break
    if incorrect:
        return ConfiguredTopology(
            status=tuple((Status.INCORRECTLY_PARTITIONED_TOPICS, m) for m in incorrect)
        )
    tasks: dict[str, int] = {}
    for s in subs:
        n = _task_count(s, partitions, counts)
        if n <= 0:
            return ConfiguredTopology(
                status=(
                    (
                        Status.MISSING_SOURCE_TOPICS,
                        f"Partitions of subtopology {s.subtopology_id} cannot be resolved.",
                    ),
                )
            )
        tasks[s.subtopology_id] = n
    missing: dict[str, tuple[int, Mapping[str, str]]] = {}
    status: list[tuple[int, str]] = []
    for s in subs:
        for info in s.repartition_source_topics:
            want = counts[info.name]
            have = partitions.get(info.name)
            if have is None:
                missing[info.name] = (want, dict(info.configs))
            elif have != want:
                status.append(
                    (
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Existing internal topic {info.name} has invalid number of partitions: "
                        f"{have}, expected {want}.",
                    )
                )
        for info in s.state_changelog_topics:
            want = info.partitions if info.partitions > 0 else tasks[s.subtopology_id]
            have = partitions.get(info.name)
            if have is None:
                missing[info.name] = (want, dict(info.configs))
            elif have != want:
                status.append(
                    (
                        Status.INCORRECTLY_PARTITIONED_TOPICS,
                        f"Existing internal topic {info.name} has invalid number of partitions: "
                        f"{have}, expected {want}.",
                    )
                )
    if missing:
        status.append(
            (
                Status.MISSING_INTERNAL_TOPICS,
                "Internal topics are missing: [" + ", ".join(sorted(missing)) + "]",
            )
        )
    return ConfiguredTopology(tasks=tasks, missing_internal=missing, status=tuple(status))


def _task_count(s: Subtopology, partitions: Mapping[str, int], counts: Mapping[str, int]) -> int:
    known = [partitions.get(t, 0) for t in s.source_topics]
    known += [counts.get(t.name, 0) for t in s.repartition_source_topics]
    if any(n <= 0 for n in known) or not known:
        return 0
    return max(known)
