"""Share groups survive a broker restart (issue 37), as Kafka keeps them in __consumer_offsets.

Share groups made before a SIGTERM or SIGKILL restart are listed after it (ListGroups, type
"share"), described with their members and epochs (ShareGroupDescribe), and a member goes on
heartbeating at its epoch (NONE, not UNKNOWN_MEMBER_ID); a member that left stays gone, and a
consumer-protocol group is listed once. Raw wire requests to a real broker subprocess.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i32

from tests.broker.share.share_support import create_topic
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_wire import WireClient
from tidelog.protocol.schema import request_types

LIST_GROUPS, SHARE_DESCRIBE = 16, 77


def heartbeat(wire: WireClient, group: str, member: str, epoch: int) -> Any:
    topics = ("t",) if epoch == 0 else None
    return wire.request(
        ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=i32(epoch), subscribed_topic_names=topics
        )
    )


def list_groups(wire: WireClient) -> list[tuple[str, str]]:
    t = request_types(LIST_GROUPS, 5)
    answer = wire.request(t.ListGroupsRequest(states_filter=(), types_filter=()))
    assert answer.error_code == ErrorCode.none, answer
    return sorted((str(g.group_id), str(g.group_type)) for g in answer.groups)


def describe(wire: WireClient, group: str) -> Any:
    t = request_types(SHARE_DESCRIBE, 1)
    answer = wire.request(
        t.ShareGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)
    )
    return answer.groups[0]


def wait_loaded(wire: WireClient) -> list[tuple[str, str]]:
    deadline = time.monotonic() + 20
    t = request_types(LIST_GROUPS, 5)
    while True:
        answer = wire.request(t.ListGroupsRequest(states_filter=(), types_filter=()))
        if answer.error_code != ErrorCode.coordinator_load_in_progress:
            break
        assert time.monotonic() < deadline, "the group coordinator never finished loading"
        time.sleep(0.05)
    return list_groups(wire)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_share_groups_and_member_epochs_survive_a_restart(broker_factory: Any, sig: int) -> None:
    broker: BrokerProcess = broker_factory(
        {
            "group.share.min.record.lock.duration.ms": "1000",
            "group.share.session.timeout.ms": "60000",
        }
    )
    create_topic(broker.bootstrap, "t", 2)
    epochs: dict[str, int] = {}
    with WireClient(broker.bootstrap) as wire:
        for group in ("s1", "s2", "s3"):
            answer = heartbeat(wire, group, f"{group}-m", 0)
            assert answer.error_code == ErrorCode.none, answer
            # As Kafka, partitions are assigned once their share state is initialized: heartbeat
            # until the member holds its assignment (the group epoch moves meanwhile).
            deadline = time.monotonic() + 30
            while answer.assignment is None or not answer.assignment.topic_partitions:
                assert time.monotonic() < deadline, f"{group}: no assignment: {answer}"
                time.sleep(0.05)
                answer = heartbeat(wire, group, f"{group}-m", int(answer.member_epoch))
                assert answer.error_code == ErrorCode.none, answer
            epochs[group] = int(answer.member_epoch)
        # s3's member leaves: the group stays, empty.
        assert heartbeat(wire, "s3", "s3-m", -1).error_code == ErrorCode.none
        before = list_groups(wire)
        described = describe(wire, "s1")
    assert before == [("s1", "share"), ("s2", "share"), ("s3", "share")]
    broker.stop(sig)
    broker.start()
    with WireClient(broker.bootstrap) as wire:
        assert wait_loaded(wire) == before
        after = describe(wire, "s1")
        assert after.group_epoch == described.group_epoch
        assert after.assignment_epoch == described.assignment_epoch
        # Members, epochs, subscriptions and assignments (topic names included) come back.
        assert after.members == described.members
        assert after.members and after.members[0].assignment.topic_partitions
        assert describe(wire, "s3").members == ()
        for group in ("s1", "s2"):
            answer = heartbeat(wire, group, f"{group}-m", epochs[group])
            assert answer.error_code == ErrorCode.none, answer
            assert int(answer.member_epoch) == epochs[group]
        assert heartbeat(wire, "s3", "s3-m", epochs["s3"]).error_code == (
            ErrorCode.unknown_member_id
        )
