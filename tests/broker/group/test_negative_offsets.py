"""A negative committed offset (KafkaJS ``resetOffsets({earliest: true})`` commits -2) is kept as
Kafka keeps it (issue 26).

Kafka's coordinator does not validate the committed offset of OffsetCommit or TxnOffsetCommit
(OffsetMetadataManager.commitOffset / commitTransactionalOffset check only the metadata size;
``OffsetAndMetadata.fromRequest`` copies the offset): -2 is stored, and OffsetFetch returns -2.
Clients read a negative committed offset as "none" (the Java Admin maps it to null, the consumer
falls back to auto.offset.reset); KafkaJS reads -2 as "from the earliest offset".
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.support.kafka_wire import WireClient
from tidelog.protocol.schema import build, request_types

COMMIT, FETCH = 8, 9


def _commit(client: WireClient, version: int, group: str, offsets: dict[int, int]) -> list[int]:
    t = request_types(COMMIT, version)
    parts = tuple(
        build(
            t.OffsetCommitRequestPartition,
            partition_index=p,
            committed_offset=o,
            committed_leader_epoch=-1,
            commit_timestamp=-1,
            committed_metadata="",
        )
        for p, o in offsets.items()
    )
    request = build(
        t.OffsetCommitRequest,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time=timedelta(milliseconds=-1),
        topics=(build(t.OffsetCommitRequestTopic, name="reset", partitions=parts),),
    )
    response = client.request(request)
    return [int(p.error_code) for p in response.topics[0].partitions]


def _fetch(client: WireClient, group: str) -> dict[int, int]:
    t = request_types(FETCH, 1)
    topic = build(t.OffsetFetchRequestTopic, name="reset", partition_indexes=(0, 1, 2))
    response: Any = client.request(build(t.OffsetFetchRequest, group_id=group, topics=(topic,)))
    return {int(p.partition_index): int(p.committed_offset) for p in response.topics[0].partitions}


def test_negative_committed_offsets_are_kept_as_kafka_keeps_them(broker_factory: Any) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("reset", 3, 1)])["reset"].result(30)
    with WireClient(broker.bootstrap) as client:
        # v2 (KafkaJS' resetOffsets path through setOffsets) and v8 (flexible).
        assert _commit(client, 2, "js-group", {0: -2, 1: 5}) == [0, 0]
        assert _commit(client, 8, "js-group", {2: -1}) == [0]
        assert _fetch(client, "js-group") == {0: -2, 1: 5, 2: -1}
        # A later commit replaces -2 like any other offset.
        assert _commit(client, 2, "js-group", {1: -2}) == [0]
        assert _fetch(client, "js-group") == {0: -2, 1: -2, 2: -1}
    broker.restart()  # replayed from __consumer_offsets
    with WireClient(broker.bootstrap) as client:
        assert _fetch(client, "js-group") == {0: -2, 1: -2, 2: -1}
