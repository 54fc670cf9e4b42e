"""Exact-frame helpers: create a topic, produce one batch, read a partition (first written for
the disk-fault tests; the wire, metadata-file and client tests create their topics with it too).

``read_partition`` checks everything the broker hands out: each batch's CRC-32C (so damaged
bytes can never pass as data) and its records, decoded with kafka-python's independent reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch
from kio.schema.create_topics.v7 import request as ct7
from kio.schema.fetch.v12 import request as f12

from tests.support.kafka_wire import WireClient, make_batch, produce_request

__all__ = (
    "Batch",
    "PartitionView",
    "create_topic",
    "create_topic_at",
    "create_topic_request",
    "expected_values",
    "fetch_once",
    "fetch_request",
    "produce",
    "read_partition",
    "batch_timestamp",
)

CORRUPT_MESSAGE = 2
KAFKA_STORAGE_ERROR = 56


@dataclass(frozen=True)
class Batch:
    base_offset: int
    values: tuple[bytes, ...]


@dataclass
class PartitionView:
    """What a read from ``start`` got: whole valid batches, then maybe an error."""

    batches: list[Batch] = field(default_factory=list)
    error: int = 0
    error_offset: int = -1
    high_watermark: int = -1
    log_start_offset: int = -1
    bad_crc: list[int] = field(default_factory=list)  # base offsets of batches served damaged


def create_topic_request(
    name: str, configs: dict[str, str] | None = None, *, partitions: int = 1
) -> Any:
    """CreateTopics v7 for one topic (the broker's default replication factor)."""
    return ct7.CreateTopicsRequest(
        topics=(
            ct7.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=-1,
                assignments=(),
                configs=tuple(
                    ct7.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                ),
            ),
        ),
        timeout=timedelta(seconds=10),
        validate_only=False,
    )


def create_topic(
    c: WireClient, name: str, configs: dict[str, str] | None = None, *, partitions: int = 1
) -> None:
    """``create_topic_request`` sent over ``c``; asserts the topic was created."""
    answer = c.request(create_topic_request(name, configs, partitions=partitions))
    assert answer.topics[0].error_code == 0, answer


def create_topic_at(
    bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    """``create_topic`` over a connection of its own."""
    with WireClient(bootstrap) as c:
        create_topic(c, name, configs, partitions=partitions)


def expected_values(topic: str, index: int, count: int = 3) -> tuple[bytes, ...]:
    return tuple(
        f"{topic}:{index}:{j}:".encode() + bytes([65 + index % 26]) * 90 for j in range(count)
    )


def produce_answer(c: WireClient, topic: str, records: bytes, acks: int = -1) -> Any:
    request = produce_request(topic, records, acks=acks, timeout_ms=10_000)
    return c.request(request).responses[0].partition_responses[0]


def batch_timestamp(index: int) -> int:
    """Batch ``index`` of a fault topic stamps its records from this time on (1 ms apart)."""
    return 1_700_000_000_000 + 1000 * index


def produce(c: WireClient, topic: str, values: tuple[bytes, ...], timestamp_ms: int = 0) -> int:
    """Append one batch; returns its base offset."""
    answer = produce_answer(c, topic, make_batch(list(values), timestamp_ms=timestamp_ms))
    assert answer.error_code == 0, answer
    return int(answer.base_offset)


def fetch_request(
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    session_id: int = 0,
    max_bytes: int = 1 << 20,
) -> Any:
    """A Fetch v12 of one partition (``max_bytes`` for the request and the partition)."""
    return f12.FetchRequest(
        max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        session_id=session_id,
        topics=(
            f12.FetchTopic(
                topic=topic,
                partitions=(
                    f12.FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def fetch_once(c: WireClient, topic: str, offset: int, max_bytes: int = 1 << 20) -> Any:
    """Partition 0's answer to a Fetch that does not wait."""
    answer = c.request(fetch_request(topic, offset, max_bytes=max_bytes))
    return answer.responses[0].partitions[0]


def parse_batches(data: bytes, view: PartitionView, *, decode: bool = True) -> list[Batch]:
    """Whole batches of a fetch answer; records decoded (kafka-python) when ``decode``, else
    ``values`` holds one empty entry per record the header counts."""
    out = []
    position = 0
    while position + 12 <= len(data):
        length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
        end = position + 12 + length
        if length < 49 or end > len(data):
            break  # a partial batch at the end of a fetch answer is allowed by the protocol
        raw = data[position:end]
        base = int.from_bytes(raw[:8], "big", signed=True)
        if crc32c(raw[21:]) != int.from_bytes(raw[17:21], "big"):
            view.bad_crc.append(base)
        elif decode:
            batch = DefaultRecordBatch(raw)
            out.append(Batch(base, tuple(bytes(r.value) for r in batch)))
        else:
            count = int.from_bytes(raw[57:61], "big", signed=True)
            delta = int.from_bytes(raw[23:27], "big", signed=True)
            if count != delta + 1:
                view.bad_crc.append(base)  # a header no consumer can trust
            out.append(Batch(base, (b"",) * count))
        position = end
    return out


def read_partition(
    bootstrap: str, topic: str, start: int = 0, limit: int = 10_000, *, decode: bool = True
) -> PartitionView:
    """Fetch from ``start`` up to the high watermark, or to the first error."""
    view = PartitionView()
    with WireClient(bootstrap) as c:
        offset = start
        for _ in range(limit):
            part = fetch_once(c, topic, offset)
            view.high_watermark = int(part.high_watermark)
            view.log_start_offset = int(part.log_start_offset)
            if part.error_code != 0:
                view.error, view.error_offset = int(part.error_code), offset
                break
            batches = parse_batches(bytes(part.records), view, decode=decode)
            if view.bad_crc or not batches:
                break
            view.batches.extend(batches)
            last = batches[-1]
            offset = last.base_offset + len(last.values)
            if offset >= view.high_watermark:
                break
    return view
