"""Which partition a keyed record goes to: the Java client's rule, shared by sink and source.

Kafka's producer sends a record with a key to `toPositive(murmur2(key)) % partitions` and a
record without a key to a "sticky" partition that changes with each new batch (KIP-480). The
sink hands kafka-python a `StickyPartitioner`, whose keyed path is that same murmur2 rule, and
`partition_for_key` states the rule on its own (for checks and for readers that want to know
where a key lives, e.g. to read only the partition of one key).
"""

from __future__ import annotations

from typing import Any

from kafka.partitioner import StickyPartitioner, murmur2


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java client (and kafka-python) picks for `key`."""
    if num_partitions <= 0:
        raise ValueError(f"a topic has at least one partition, not {num_partitions}")
    return (int(murmur2(key)) & 0x7FFFFFFF) % num_partitions


def java_partitioner() -> Any:
    """A kafka-python partitioner placing records as Kafka's Java producer does."""
    return StickyPartitioner()
