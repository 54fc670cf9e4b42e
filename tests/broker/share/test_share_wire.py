"""Share-group error paths with raw wire requests (Kafka's error codes, never a crash)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.share_acknowledge.v2 import request as ack2
from kio.schema.share_fetch.v1 import request as fetch1
from kio.schema.share_fetch.v2 import request as fetch2
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i8, i32, i64

from tests.broker.share.share_support import (
    create_topic,
    produce,
    set_group_configs,
    start_share_broker,
)
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_wire import WireClient


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from start_share_broker(
        Path(tmp_path_factory.mktemp("sharewire")), {"group.share.max.size": "2"}
    )


def heartbeat(
    wire: WireClient, group: str, member: str, epoch: int, topics: tuple[str, ...] | None
) -> Any:
    return wire.request(
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=i32(epoch), subscribed_topic_names=topics
        )
    )


def share_fetch(
    wire: WireClient,
    group: str,
    member: str,
    epoch: int,
    topic_id: Any,
    acks: tuple[tuple[int, int, tuple[int, ...]], ...] = (),
    *,
    version: int = 2,
    renew: bool = False,
    max_wait_ms: int = 500,
) -> Any:
    mod = fetch2 if version == 2 else fetch1
    batches = tuple(
        mod.AcknowledgementBatch(
            first_offset=i64(f),
            last_offset=i64(last),
            acknowledge_types=tuple(i8(t) for t in kinds),
        )
        for f, last, kinds in acks
    )
    extra: dict[str, Any] = {"is_renew_ack": renew} if version == 2 else {}
    return wire.request(
        mod.ShareFetchRequest(
            group_id=group,
            member_id=member,
            share_session_epoch=i32(epoch),
            max_wait=timedelta(milliseconds=max_wait_ms),
            min_bytes=i32(1),
            max_bytes=i32(1 << 20),
            max_records=i32(500),
            batch_size=i32(500),
            topics=(
                mod.FetchTopic(
                    topic_id=topic_id,
                    partitions=(
                        mod.FetchPartition(partition_index=i32(0), acknowledgement_batches=batches),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            **extra,
        )
    )


def share_ack(
    wire: WireClient,
    group: str,
    member: str,
    epoch: int,
    topic_id: Any,
    first: int,
    last: int,
    kind: int,
) -> Any:
    return wire.request(ack_request(group, member, epoch, topic_id, first, last, kind))


def ack_request(
    group: str, member: str, epoch: int, topic_id: Any, first: int, last: int, kind: int
) -> Any:
    return ack2.ShareAcknowledgeRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=i32(epoch),
        topics=(
            ack2.AcknowledgeTopic(
                topic_id=topic_id,
                partitions=(
                    ack2.AcknowledgePartition(
                        partition_index=i32(0),
                        acknowledgement_batches=(
                            ack2.AcknowledgementBatch(
                                first_offset=i64(first),
                                last_offset=i64(last),
                                acknowledge_types=(i8(kind),),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )


def _join(wire: WireClient, group: str, member: str, topic: str) -> tuple[int, Any]:
    """Join, then heartbeat until the assignment holds partition 0 (as Kafka, a partition is
    assigned once its share state is initialized, which the first join of a group starts)."""
    answer = heartbeat(wire, group, member, 0, (topic,))
    deadline = time.monotonic() + 10
    while True:
        assert answer.error_code == ErrorCode.none, answer
        epoch = int(answer.member_epoch)
        assigned = () if answer.assignment is None else answer.assignment.topic_partitions
        if assigned:
            (tp,) = assigned
            assert list(tp.partitions) == [0]
            return epoch, tp.topic_id
        assert time.monotonic() < deadline, "partition 0 never assigned"
        time.sleep(0.05)
        answer = heartbeat(wire, group, member, epoch, None)


def test_api_versions_advertise_the_share_apis(share_broker: BrokerProcess) -> None:
    with WireClient(share_broker.bootstrap) as wire:
        answer = wire.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}
    assert ranges[76] == (1, 1)
    assert ranges[78] == (1, 2)
    assert ranges[79] == (1, 2)


def test_heartbeat_errors(share_broker: BrokerProcess) -> None:
    create_topic(share_broker.bootstrap, "sw-hb")
    with WireClient(share_broker.bootstrap) as wire:
        assert heartbeat(wire, "sw-hb", "", 0, ("sw-hb",)).error_code == ErrorCode.invalid_request
        assert heartbeat(wire, "sw-hb", "m1", 0, None).error_code == ErrorCode.invalid_request
        # As Apache Kafka 4.4 answers (tests/kafkaref): a group only a join creates is not found
        # before it; an unknown member of a group that exists is UNKNOWN_MEMBER_ID.
        unknown = heartbeat(wire, "sw-hb", "ghost", 3, None)
        assert unknown.error_code == ErrorCode.group_id_not_found and unknown.member_epoch == 0
        epoch, _ = _join(wire, "sw-hb", "m1", "sw-hb")
        assert epoch >= 1
        assert heartbeat(wire, "sw-hb", "ghost", 3, None).error_code == ErrorCode.unknown_member_id
        same = heartbeat(wire, "sw-hb", "m1", epoch, None)
        assert same.error_code == ErrorCode.none and same.member_epoch == epoch
        assert same.assignment is None  # unchanged
        stale = heartbeat(wire, "sw-hb", "m1", epoch + 7, None)
        assert stale.error_code == ErrorCode.fenced_member_epoch
        # a second member joins: the group epoch moves, both read partition 0
        epoch2, _ = _join(wire, "sw-hb", "m2", "sw-hb")
        assert epoch2 > epoch
        moved = heartbeat(wire, "sw-hb", "m1", epoch, None)
        assert moved.member_epoch == epoch2 and moved.assignment is not None
        # group.share.max.size=2 on this broker
        full = heartbeat(wire, "sw-hb", "m3", 0, ("sw-hb",))
        assert full.error_code == ErrorCode.group_max_size_reached
        left = heartbeat(wire, "sw-hb", "m2", -1, None)
        assert left.error_code == ErrorCode.none and left.member_epoch == -1


def test_share_fetch_session_and_acknowledgement_errors(share_broker: BrokerProcess) -> None:
    create_topic(share_broker.bootstrap, "sw-fetch")
    set_group_configs(share_broker.bootstrap, "sw-fetch", {"share.auto.offset.reset": "earliest"})
    produce(share_broker.bootstrap, "sw-fetch", [b"a", b"b", b"c", b"d"])
    with WireClient(share_broker.bootstrap) as wire:
        _, topic_id = _join(wire, "sw-fetch", "m1", "sw-fetch")
        _join(wire, "sw-fetch", "m2", "sw-fetch")
        # no session yet
        assert (
            share_fetch(wire, "sw-fetch", "m1", 1, topic_id).error_code
            == ErrorCode.share_session_not_found
        )
        # acknowledgements on the opening epoch
        opening = share_fetch(wire, "sw-fetch", "m1", 0, topic_id, ((0, 0, (1,)),))
        assert opening.error_code == ErrorCode.invalid_request
        got = share_fetch(wire, "sw-fetch", "m1", 0, topic_id)
        assert got.error_code == ErrorCode.none
        assert got.acquisition_lock_timeout == timedelta(seconds=30)
        (part,) = got.responses[0].partitions
        assert [
            (r.first_offset, r.last_offset, r.delivery_count) for r in part.acquired_records
        ] == [(0, 3, 1)]
        assert part.records  # the batch bytes
        # a wrong epoch
        assert (
            share_fetch(wire, "sw-fetch", "m1", 5, topic_id).error_code
            == ErrorCode.invalid_share_session_epoch
        )
        # acknowledging offsets beyond what was acquired: INVALID_RECORD_STATE for the batch
        bad = share_fetch(wire, "sw-fetch", "m1", 1, topic_id, ((2, 9, (1,)),), max_wait_ms=0)
        (part,) = bad.responses[0].partitions
        assert part.acknowledge_error_code == ErrorCode.invalid_record_state.value
        # another member cannot acknowledge m1's records
        with WireClient(share_broker.bootstrap) as other:
            share_fetch(other, "sw-fetch", "m2", 0, topic_id, max_wait_ms=0)
            theirs = share_ack(other, "sw-fetch", "m2", 1, topic_id, 0, 0, 1)
            assert theirs.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
        # ShareAcknowledge never opens a session; first > last is INVALID_REQUEST
        assert share_ack(wire, "sw-fetch", "m1", 0, topic_id, 0, 0, 1).error_code == (
            ErrorCode.invalid_share_session_epoch
        )
        backwards = share_ack(wire, "sw-fetch", "m1", 2, topic_id, 3, 1, 1)
        assert backwards.responses[0].partitions[0].error_code == ErrorCode.invalid_request
        # Renew (4) needs v2; with v2 and is_renew_ack it renews without fetching
        v1 = share_fetch(wire, "sw-fetch", "m1", 3, topic_id, ((0, 0, (4,)),), version=1)
        assert (
            v1.responses[0].partitions[0].acknowledge_error_code == ErrorCode.invalid_request.value
        )
        renew = share_fetch(wire, "sw-fetch", "m1", 4, topic_id, ((0, 0, (4,)),), renew=True)
        (part,) = renew.responses[0].partitions
        assert part.acknowledge_error_code == 0 and part.acquired_records == ()
        # accept 0-1, release 2-3: the release comes back with delivery count 2
        done = share_ack(wire, "sw-fetch", "m1", 5, topic_id, 0, 1, 1)
        assert done.responses[0].partitions[0].error_code == ErrorCode.none
        rel = share_ack(wire, "sw-fetch", "m1", 6, topic_id, 2, 3, 2)
        assert rel.responses[0].partitions[0].error_code == ErrorCode.none
        again = share_fetch(wire, "sw-fetch", "m1", 7, topic_id)
        (part,) = again.responses[0].partitions
        assert [
            (r.first_offset, r.last_offset, r.delivery_count) for r in part.acquired_records
        ] == [(2, 3, 2)]
        # closing the session (-1) releases what the member still holds
        closed = share_fetch(wire, "sw-fetch", "m1", -1, topic_id, max_wait_ms=0)
        assert closed.error_code == ErrorCode.none
        assert (
            share_fetch(wire, "sw-fetch", "m1", 8, topic_id).error_code
            == ErrorCode.share_session_not_found
        )
        reopened = share_fetch(wire, "sw-fetch", "m1", 0, topic_id)
        (part,) = reopened.responses[0].partitions
        assert [
            (r.first_offset, r.last_offset, r.delivery_count) for r in part.acquired_records
        ] == [(2, 3, 3)]


def test_group_id_of_a_classic_group_is_not_a_share_group(share_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer

    create_topic(share_broker.bootstrap, "sw-classic")
    c = Consumer({"bootstrap.servers": share_broker.bootstrap, "group.id": "sw-classic-g"})
    c.subscribe(["sw-classic"])
    try:
        for _ in range(10):
            c.poll(0.5)
        with WireClient(share_broker.bootstrap) as wire:
            answer = heartbeat(wire, "sw-classic-g", "m1", 0, ("sw-classic",))
        assert answer.error_code == ErrorCode.group_id_not_found
    finally:
        c.close()


def test_closing_the_connection_releases_the_session_records(share_broker: BrokerProcess) -> None:
    create_topic(share_broker.bootstrap, "sw-conn")
    set_group_configs(share_broker.bootstrap, "sw-conn", {"share.auto.offset.reset": "earliest"})
    produce(share_broker.bootstrap, "sw-conn", [b"a", b"b"])
    first = WireClient(share_broker.bootstrap)
    _, topic_id = _join(first, "sw-conn", "m1", "sw-conn")
    got = share_fetch(first, "sw-conn", "m1", 0, topic_id)
    assert got.responses[0].partitions[0].acquired_records[0].last_offset == 1
    first.close()  # a crashed worker: its records come back without waiting for the lock
    with WireClient(share_broker.bootstrap) as second:
        _join(second, "sw-conn", "m2", "sw-conn")  # m1 stays a member (no heartbeat needed yet)
        again = share_fetch(second, "sw-conn", "m2", 0, topic_id, max_wait_ms=5000)
        ranges = again.responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in ranges] == [(0, 1, 2)]
