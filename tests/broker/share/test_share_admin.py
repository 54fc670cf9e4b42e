"""Share-group admin APIs over the wire: ShareGroupDescribe, ListGroups/DescribeGroups/
DeleteGroups of the ``share`` type, and Describe/Alter/DeleteShareGroupOffsets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_share_group_offsets.v0 import request as alter0
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_share_group_offsets.v0 import request as delete0
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_share_group_offsets.v1 import request as describe1
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.static.primitive import i32, i64

from tests.broker.share.share_support import (
    create_topic,
    produce,
    set_group_configs,
    start_share_broker,
)
from tests.broker.share.test_share_wire import _join, heartbeat, share_ack, share_fetch
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_wire import WireClient


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from start_share_broker(Path(tmp_path_factory.mktemp("shareadmin")))


def describe_offsets(wire: WireClient, group: str, topic: str | None) -> Any:
    topics = (
        None
        if topic is None
        else (
            describe1.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=(i32(0),)),
        )
    )
    answer = wire.request(
        describe1.DescribeShareGroupOffsetsRequest(
            groups=(describe1.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics),)
        )
    )
    (g,) = answer.groups
    return g


def test_describe_list_and_offsets(share_broker: BrokerProcess) -> None:
    create_topic(share_broker.bootstrap, "sa-t")
    set_group_configs(share_broker.bootstrap, "sa-g", {"share.auto.offset.reset": "earliest"})
    produce(share_broker.bootstrap, "sa-t", [b"x"] * 10)
    with WireClient(share_broker.bootstrap) as wire:
        epoch, topic_id = _join(wire, "sa-g", "m1", "sa-t")
        described = wire.request(
            ShareGroupDescribeRequest(
                group_ids=("sa-g", "nope"), include_authorized_operations=False
            )
        )
        g, missing = described.groups
        assert g.error_code == ErrorCode.none and g.group_state == "Stable"
        assert g.assignor_name == "simple" and g.group_epoch == epoch
        (m,) = g.members
        assert m.member_id == "m1" and tuple(m.subscribed_topic_names) == ("sa-t",)
        (tp,) = m.assignment.topic_partitions
        assert tp.topic_name == "sa-t" and tp.topic_id == topic_id and list(tp.partitions) == [0]
        assert missing.error_code == ErrorCode.group_id_not_found
        listed = wire.request(ListGroupsRequest(states_filter=(), types_filter=("share",)))
        assert [(x.group_id, x.group_type, x.protocol_type) for x in listed.groups] == [
            ("sa-g", "share", "share")
        ]
        dg = wire.request(
            DescribeGroupsRequest(groups=("sa-g",), include_authorized_operations=False)
        )
        assert dg.groups[0].error_code == ErrorCode.group_id_not_found
        # consume and accept 4 records: start offset 4, lag 6
        share_fetch(wire, "sa-g", "m1", 0, topic_id)
        share_ack(wire, "sa-g", "m1", 1, topic_id, 0, 3, 1)
        offsets = describe_offsets(wire, "sa-g", None)
        (t,) = offsets.topics
        (p,) = t.partitions
        assert (t.topic_name, p.partition_index, p.start_offset, p.lag) == ("sa-t", 0, 4, 6)
        # alter/delete need an empty group; DeleteGroups too
        assert alter(wire, "sa-g", "sa-t", 7).error_code == ErrorCode.non_empty_group
        assert delete_offsets(wire, "sa-g", "sa-t").error_code == ErrorCode.non_empty_group
        dg = wire.request(DeleteGroupsRequest(groups_names=("sa-g",)))
        assert dg.results[0].error_code == ErrorCode.non_empty_group
        heartbeat(wire, "sa-g", "m1", -1, None)
        done = alter(wire, "sa-g", "sa-t", 7)
        assert done.error_code == ErrorCode.none
        assert done.responses[0].partitions[0].error_code == ErrorCode.none
        assert alter(wire, "sa-g", "no-such-topic", 0).responses[0].partitions[0].error_code == (
            ErrorCode.unknown_topic_or_partition
        )
        p = describe_offsets(wire, "sa-g", "sa-t").topics[0].partitions[0]
        assert (p.start_offset, p.lag) == (7, 3)
        # the next member starts at 7
        _join(wire, "sa-g", "m2", "sa-t")
        got = share_fetch(wire, "sa-g", "m2", 0, topic_id)
        ranges = got.responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset) for r in ranges] == [(7, 9)]
        heartbeat(wire, "sa-g", "m2", -1, None)
        deleted = delete_offsets(wire, "sa-g", "sa-t")
        assert deleted.error_code == ErrorCode.none
        assert deleted.responses[0].error_code == ErrorCode.none
        p = describe_offsets(wire, "sa-g", "sa-t").topics[0].partitions[0]
        assert p.start_offset == -1
        dg = wire.request(DeleteGroupsRequest(groups_names=("sa-g",)))
        assert dg.results[0].error_code == ErrorCode.none
        listed = wire.request(ListGroupsRequest(states_filter=(), types_filter=("share",)))
        assert listed.groups == ()


def alter(wire: WireClient, group: str, topic: str, offset: int) -> Any:
    return wire.request(
        alter0.AlterShareGroupOffsetsRequest(
            group_id=group,
            topics=(
                alter0.AlterShareGroupOffsetsRequestTopic(
                    topic_name=topic,
                    partitions=(
                        alter0.AlterShareGroupOffsetsRequestPartition(
                            partition_index=i32(0), start_offset=i64(offset)
                        ),
                    ),
                ),
            ),
        )
    )


def delete_offsets(wire: WireClient, group: str, topic: str) -> Any:
    return wire.request(
        delete0.DeleteShareGroupOffsetsRequest(
            group_id=group, topics=(delete0.DeleteShareGroupOffsetsRequestTopic(topic_name=topic),)
        )
    )
